import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

/** The task is no longer ours: the reaper released it, or another attempt owns it now. */
export class LostClaimError extends Error {
  constructor(taskId: number) {
    super(`task ${taskId} is no longer held by this attempt`);
    this.name = "LostClaimError";
  }
}

export interface Checkpoint {
  processedOffset: number;
  /** Set when the task moves to a new position, e.g. the next deal of a mail task. */
  cursor?: Record<string, unknown>;
  /** Added to the task's counters (created, matched, already_here, skipped, failed). */
  statsDelta: Record<string, number>;
  /** Added to the task's rows_read / rows_written (per-slot accounting without a ledger). */
  rowsRead?: number;
  rowsWritten?: number;
}

/**
 * Records how far the task got. It runs inside the window's transaction, so the checkpoint commits
 * with the rows it counts or not at all: it can never claim more than was committed. It is fenced
 * on the claim token; a stale attempt gets LostClaimError and its whole window rolls back.
 * It also refreshes locked_at, which is how the reaper tells a live task from a dead worker's,
 * and records the window in drover.window_commits (the run's throughput over time).
 */
export async function writeCheckpoint(
  q: Queryable,
  taskId: number,
  claimToken: string,
  c: Checkpoint,
): Promise<void> {
  // What the window wrote or failed (not what was already here): the run's throughput.
  const d = c.statsDelta;
  const written = (d.created ?? 0) + (d.matched ?? 0) + (d.skipped ?? 0) + (d.failed ?? 0);
  const rows = await q.execute(sql`
    with moved as (
      update drover.tasks t
         set processed_offset = ${c.processedOffset},
             cursor = coalesce(${c.cursor ? JSON.stringify(c.cursor) : null}::jsonb, t.cursor),
             stats = (select coalesce(jsonb_object_agg(k, coalesce((t.stats ->> k)::bigint, 0) + coalesce((d.delta ->> k)::bigint, 0)), '{}'::jsonb)
                        from (select ${JSON.stringify(c.statsDelta)}::jsonb as delta) d,
                             jsonb_object_keys(t.stats || d.delta) as k),
             rows_read = t.rows_read + ${c.rowsRead ?? 0}, rows_written = t.rows_written + ${c.rowsWritten ?? 0},
             locked_at = now(), updated_at = now()
       where t.id = ${taskId} and t.status = 'running' and t.locked_by = ${claimToken}
      returning t.id, t.run_id),
    logged as (
      insert into drover.window_commits (run_id, task_id, rows)
      select run_id, id, ${written} from moved where ${written}::int > 0)
    select id from moved`);
  if (rows.length !== 1) throw new LostClaimError(taskId);
}
