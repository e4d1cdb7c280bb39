import type { Queryable, RunRow } from "@drover/db";
import type { CallContext } from "@drover/proto";
import { visibleRun } from "./auth.js";
import { Precondition } from "./domain-errors.js";
import { loadRun } from "./run-view.js";
import { requireRunId } from "./validation.js";

/** The run a call names, if the caller may see it; NOT_FOUND otherwise, as if there were none. */
export async function loadVisibleRun(q: Queryable, runId: string, call: CallContext): Promise<RunRow> {
  return visibleRun(call, await loadRun(q, requireRunId(runId)), runId);
}

/** The answer to steering or verifying a run whose tasks retention pruned. */
export function prunedError(runId: string): Precondition {
  return new Precondition(
    `run ${runId} is past retention and its tasks were pruned; start a new run (the ledger keeps what was imported)`,
    "RUN_PRUNED",
  );
}
