import { LIVE_RUN_STATUSES, type Queryable } from "@drover/db";
import { taskCountsByKind, unfinishedKindTasks } from "@drover/engine";
import { sql } from "drizzle-orm";

export interface MissingRow {
  tenantId: string;
  source: string;
  sourceAccount: string;
  kind: string;
  sourceId: string;
}

/**
 * Why a source row has no ledger entry and no note naming it, from what the runs know: no run read
 * the account, the latest run left the kind out, it has not reached the kind yet, a task of the kind
 * failed or was cancelled (its reason), the run started no task of the kind or read it only in part
 * (what it noted about the kind, e.g. mail whose deals are not in the ledger), or the run went
 * through the kind and the source did not list the row then. One sentence for a person; never a
 * guess stated as fact: "read every page" only when tasks of the kind ran and the run noted nothing
 * about the kind as a whole.
 */
export async function explainMissingRow(q: Queryable, row: MissingRow): Promise<string> {
  const subject = `${row.kind} ${row.sourceId} is not in the ledger and no note mentions it`;
  const [run] = await q.execute<{
    id: string;
    status: string;
    plan: string[][];
    current_phase: number;
    error: string | null;
  }>(sql`
    select id, status, plan, current_phase, error from drover.runs
     where tenant_id = ${row.tenantId} and source = ${row.source} and source_account = ${row.sourceAccount}
     order by created_at desc limit 1`);
  if (!run) return `${subject}: no run has imported tenant ${row.tenantId} from this account yet`;
  const phase = run.plan.findIndex((kinds) => kinds.includes(row.kind));
  if (phase < 0) return `${subject}: the latest run, ${run.id}, did not import ${row.kind}`;
  const live = (LIVE_RUN_STATUSES as readonly string[]).includes(run.status);
  if (live && run.current_phase < phase) {
    return `${subject}: run ${run.id} is in phase ${run.current_phase + 1} of ${run.plan.length} and reaches ${row.kind} in phase ${phase + 1}`;
  }
  const task = await unfinishedKindTasks(q, run.id, row.kind);
  if (task?.status === "failed") {
    return `${subject}: in run ${run.id}, ${task.n} ${row.kind} task(s) failed${task.lastError ? ` (${task.lastError})` : ""}, so the row may never have been read`;
  }
  if (task?.status === "cancelled") {
    return `${subject}: run ${run.id} was stopped before its ${row.kind} tasks finished; resume it to read the rest`;
  }
  if (task) return `${subject}: run ${run.id} is still reading ${row.kind}`;
  if (run.status === "failed") return `${subject}: run ${run.id} failed${run.error ? `: ${run.error}` : ""}`;
  // What the run said about the kind as a whole (e.g. mail whose deals are not in the ledger).
  const said = await q.execute<{ reason: string }>(sql`
    select reason from drover.notes
     where run_id = ${run.id}::uuid and kind = ${row.kind} and subject_id is null and level in ('warn', 'info')
     group by reason order by min(id) limit 3`);
  const read = (await taskCountsByKind(q, run.id)).get(row.kind)?.total ?? 0;
  const reasons = said.map((n) => n.reason).join("; ");
  if (read === 0) {
    return `${subject}: run ${run.id} read no ${row.kind}: ${
      reasons ||
      `no ${row.kind} task was started (the source had nothing to list, or what ${row.kind} hangs off was not imported)`
    }`;
  }
  if (reasons) return `${subject}: run ${run.id} read ${row.kind} only in part: ${reasons}`;
  return `${subject}: run ${run.id} read every ${row.kind} page and the source did not list it then (created since, or not visible to the token)`;
}
