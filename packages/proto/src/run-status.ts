import { RUN_STATUSES, type RunStatus as RunStatusName } from "@drover/db/statuses";
import { RunStatus } from "./gen/drover/v1/run_pb.js";

/**
 * The API's RunStatus for each word of the run status vocabulary (@drover/db/statuses), by name:
 * `stopping` is RUN_STATUS_STOPPING. A word without an enum member does not compile.
 */
const BY_NAME = Object.fromEntries(
  RUN_STATUSES.map((name) => [name, RunStatus[name.toUpperCase() as Uppercase<RunStatusName>]]),
) as Record<RunStatusName, RunStatus>;
const NAMES = new Map<RunStatus, RunStatusName>(RUN_STATUSES.map((name) => [BY_NAME[name], name]));

/** The run status vocabulary's words, in lifecycle order, for clients that list or parse them. */
export { LIVE_RUN_STATUSES, RUN_STATUSES } from "@drover/db/statuses";

/** A run status as operators read it (the CLI, the run page): the word the database stores. */
export function runStatusName(status: RunStatus): string {
  return NAMES.get(status) ?? "unknown";
}

/** The API's RunStatus for a status word (the database's, or an operator's filter). */
export function runStatusFromName(name: string): RunStatus | undefined {
  return Object.hasOwn(BY_NAME, name) ? BY_NAME[name as RunStatusName] : undefined;
}

/** The API's RunStatus for a status the database stores. */
export function toProtoRunStatus(status: RunStatusName): RunStatus {
  return BY_NAME[status];
}

/** The database's status word for an API RunStatus; undefined for UNSPECIFIED or an unknown number. */
export function fromProtoRunStatus(status: RunStatus): RunStatusName | undefined {
  return NAMES.get(status);
}
