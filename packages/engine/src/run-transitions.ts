import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

/**
 * Moves the run's barrier from `phase` to `phase + 1`. Two fences in one statement:
 * `current_phase = phase` lets only the phase the run is on advance (a late finisher from an earlier
 * phase cannot), and NOT EXISTS lets it advance only once nothing of that phase is pending or
 * running. Fifty finishers may race here; exactly one gets a row back, and only that caller seeds
 * the next phase, in the same transaction.
 */
export async function advanceBarrier(q: Queryable, runId: string, phase: number): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.runs r
       set current_phase = ${phase} + 1, updated_at = now()
     where r.id = ${runId}::uuid and r.current_phase = ${phase} and r.status = 'running'
       and not exists (select 1 from drover.tasks t
                        where t.run_id = r.id and t.phase = ${phase} and t.status in ('pending', 'running'))
    returning r.id`);
  return rows.length === 1;
}

/**
 * Ends a run whose barrier passed its last phase: failed if any task failed, succeeded otherwise.
 * Fenced on the barrier being past the plan so it cannot end a run with work left. A verification
 * of an earlier finish (before a retry or resume) no longer describes the run and is cleared; the
 * leader verifies it again.
 */
export async function finalizeRun(q: Queryable, runId: string): Promise<"succeeded" | "failed" | undefined> {
  const rows = await q.execute<{ status: "succeeded" | "failed" }>(sql`
    update drover.runs r
       set status = case when exists (select 1 from drover.tasks t where t.run_id = r.id and t.status = 'failed')
                         then 'failed' else 'succeeded' end,
           error = (select case when count(*) > 0 then count(*) || ' task(s) failed; first: ' || min(t.last_error) end
                      from drover.tasks t where t.run_id = r.id and t.status = 'failed'),
           finished_at = now(), updated_at = now(), verification = null
     where r.id = ${runId}::uuid and r.status = 'running' and r.current_phase >= jsonb_array_length(r.plan)
    returning r.status`);
  return rows[0]?.status;
}

/**
 * A stopping run becomes stopped once nothing of it runs: fenced on NOT EXISTS running tasks,
 * so a task still committing its last window keeps the run in stopping.
 */
export async function settleStoppingRun(q: Queryable, runId: string): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.runs r set status = 'stopped', finished_at = now(), updated_at = now(), verification = null
     where r.id = ${runId}::uuid and r.status = 'stopping'
       and not exists (select 1 from drover.tasks t where t.run_id = r.id and t.status = 'running')
    returning r.id`);
  return rows.length === 1;
}
