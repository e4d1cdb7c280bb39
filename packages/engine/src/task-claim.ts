import type { Queryable, TaskRow } from "@drover/db";
import { sql } from "drizzle-orm";
import { toTaskRow } from "./task-row.js";

/**
 * Claims a pending task for one worker. Racers all issue this UPDATE; `status = 'pending'` is the
 * fence, so exactly one of them gets the row back and may run it. The run must still be running:
 * a claim can never slip in after a stop was requested. `claimToken` is unique per claim, and every
 * later write of this attempt (checkpoint, finish) is fenced on it, so a worker the reaper gave up
 * on can never overwrite the attempt that replaced it.
 */
export async function claimTask(
  q: Queryable,
  taskId: number,
  claimToken: string,
): Promise<TaskRow | undefined> {
  const rows = await q.execute(sql`
    update drover.tasks t
       set status = 'running', attempts = t.attempts + 1, locked_by = ${claimToken}, locked_at = now(),
           started_at = coalesce(t.started_at, now()), updated_at = now()
     where t.id = ${taskId} and t.status = 'pending' and t.available_at <= now()
       and exists (select 1 from drover.runs r where r.id = t.run_id and r.status = 'running')
    returning t.*`);
  const row = rows[0];
  return row ? toTaskRow(row) : undefined;
}
