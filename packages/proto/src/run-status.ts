import { RunStatus } from "./gen/drover/v1/run_pb.js";

const NAMES: Record<number, string> = {
  [RunStatus.PENDING]: "pending",
  [RunStatus.RUNNING]: "running",
  [RunStatus.STOPPING]: "stopping",
  [RunStatus.STOPPED]: "stopped",
  [RunStatus.SUCCEEDED]: "succeeded",
  [RunStatus.FAILED]: "failed",
};

/** A run status as operators read it (the CLI, the run page): the word the database stores. */
export function runStatusName(status: RunStatus): string {
  return NAMES[status] ?? "unknown";
}
