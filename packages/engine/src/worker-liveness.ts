import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

/**
 * A worker's liveness record (drover.workers), a lease on being alive: every statement on it is
 * here. The worker registers before it pulls, moves the record's expiry forward every few seconds,
 * and deletes it when it has drained. The reaper treats a record past its expiry (or gone) as a
 * dead worker and releases its tasks at once (releaseTasksOfDeadWorkers in task-transitions.ts);
 * claims are fenced on the record being alive (claimTask). All times are the database's clock.
 */

/** A fresh record for one worker process, alive for `livenessMs` unless heartbeated. */
export async function registerWorker(
  q: Queryable,
  worker: { id: string; workerId: string; laneWidth: number; livenessMs: number },
): Promise<void> {
  await q.execute(sql`
    insert into drover.workers (id, worker_id, lane_width, expires_at)
    values (${worker.id}::uuid, ${worker.workerId}, ${worker.laneWidth},
            now() + make_interval(secs => ${worker.livenessMs / 1000}))`);
}

/**
 * Moves the record's expiry forward and says whether the worker's event loop is busy. Fenced on the record not having expired: once it has, the
 * reaper may already have released the worker's tasks, and reviving it would claim a life the
 * tasks no longer reflect. False means this registration is dead for good (its claims are refused
 * from now on) and the worker must register again under a new id.
 */
export async function heartbeatWorker(
  q: Queryable,
  id: string,
  livenessMs: number,
  busy = false,
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.workers
       set heartbeat_at = now(), expires_at = now() + make_interval(secs => ${livenessMs / 1000}),
           busy = ${busy}
     where id = ${id}::uuid and expires_at > now()
    returning id`);
  return rows.length === 1;
}

/**
 * A drained worker's goodbye: it holds no task any more, so its record goes. A task it could not
 * hand back is then released by the reaper's next pass (a claim whose record is gone).
 */
export async function removeWorker(q: Queryable, id: string): Promise<boolean> {
  const rows = await q.execute(sql`delete from drover.workers where id = ${id}::uuid returning id`);
  return rows.length === 1;
}

/**
 * The pool's lane slots (the lane widths of the workers alive now) and whether any of those
 * workers is busy, for the dispatcher's fair shares.
 */
export async function liveLaneSlots(
  q: Queryable,
): Promise<{ workers: number; slots: number; busy: boolean }> {
  const [row] = await q.execute<{ workers: number; slots: number; busy: boolean }>(sql`
    select count(*)::int as workers, coalesce(sum(lane_width), 0)::int as slots,
           coalesce(bool_or(busy), false) as busy
      from drover.workers where expires_at > now()`);
  return { workers: row?.workers ?? 0, slots: row?.slots ?? 0, busy: row?.busy ?? false };
}
