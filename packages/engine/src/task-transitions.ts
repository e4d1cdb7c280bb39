import type { Db, Queryable } from "@drover/db";
import type { TaskSeed } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { insertTaskSeeds } from "./task-seed.js";

/**
 * The ends of an attempt. Each is one UPDATE fenced on (status = 'running', locked_by = token):
 * only the attempt that holds the claim can end it, so a late zombie changes nothing.
 * Each returns false when the fence did not match.
 */

/** Success, together with the successors the task seeds (the next page of its stripe). */
export async function finishTaskSucceeded(
  q: Queryable,
  task: { id: number; runId: string; phase: number },
  claimToken: string,
  successors: readonly TaskSeed[] = [],
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks
       set status = 'succeeded', finished_at = now(), locked_by = null, last_error = null, updated_at = now()
     where id = ${task.id} and status = 'running' and locked_by = ${claimToken}
    returning id`);
  if (rows.length !== 1) return false;
  await insertTaskSeeds(q, task.runId, task.phase, successors);
  return true;
}

export async function finishTaskFailed(
  q: Queryable,
  taskId: number,
  claimToken: string,
  error: string,
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks
       set status = 'failed', finished_at = now(), locked_by = null, last_error = ${error}, updated_at = now()
     where id = ${taskId} and status = 'running' and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

/** A stop was requested: the current window committed, the rest of the task waits for a resume. */
export async function finishTaskCancelled(
  q: Queryable,
  taskId: number,
  claimToken: string,
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks
       set status = 'cancelled', finished_at = now(), locked_by = null, updated_at = now()
     where id = ${taskId} and status = 'running' and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

/**
 * Transient failure: back to pending with the cursor intact, not before `delayMs`, so the retry
 * resumes mid-page instead of rewriting it. Cleared dispatched_at lets the dispatcher publish it again.
 */
export async function releaseTask(
  q: Queryable,
  taskId: number,
  claimToken: string,
  error: string,
  delayMs: number,
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks
       set status = 'pending', locked_by = null, locked_at = null, dispatched_at = null, last_error = ${error},
           available_at = now() + make_interval(secs => ${delayMs / 1000}), updated_at = now()
     where id = ${taskId} and status = 'running' and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

/**
 * Rate limited: back to pending until the source's reset, and the attempt the claim counted is
 * given back — a wait measured in hours must not burn retries.
 */
export async function parkTask(
  q: Queryable,
  taskId: number,
  claimToken: string,
  retryAt: Date,
  reason: string,
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks
       set status = 'pending', attempts = greatest(attempts - 1, 0), locked_by = null, locked_at = null,
           dispatched_at = null, last_error = ${reason}, available_at = ${retryAt.toISOString()}::timestamptz,
           updated_at = now()
     where id = ${taskId} and status = 'running' and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

/**
 * Graceful shutdown: hand the task back at once for another worker, cursor intact and the attempt
 * not counted — being deployed is not the task's fault. It stays marked as dispatched because the
 * worker naks its message, which JetStream redelivers at once; should that nak be lost, the
 * reaper's re-dispatch catches it.
 */
export async function handBackTask(q: Queryable, taskId: number, claimToken: string): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks
       set status = 'pending', attempts = greatest(attempts - 1, 0), locked_by = null, locked_at = null,
           dispatched_at = now(), available_at = now(), updated_at = now()
     where id = ${taskId} and status = 'running' and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

/** A pending task of a stopping run never starts: it is cancelled where it stands. */
export async function cancelPendingTask(q: Queryable, taskId: number): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks set status = 'cancelled', finished_at = now(), updated_at = now()
     where id = ${taskId} and status = 'pending'
    returning id`);
  return rows.length === 1;
}

/** Keeps a long task's lock fresh between windows, so the reaper does not mistake it for a dead worker's. */
export async function touchTask(q: Queryable, taskId: number, claimToken: string): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks set locked_at = now()
     where id = ${taskId} and status = 'running' and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

/**
 * Parks every pending task of every live run on the same source account until `retryAt`: a 429 or
 * an exhausted daily allowance is the account's wall, and the dispatcher skips parked tasks until
 * they are due. Attempts are untouched.
 */
export async function parkSiblings(
  q: Queryable,
  account: { source: string; sourceAccount: string },
  retryAt: Date,
): Promise<number> {
  const rows = await q.execute(sql`
    update drover.tasks t set available_at = ${retryAt.toISOString()}::timestamptz, dispatched_at = null, updated_at = now()
      from drover.runs r
     where r.id = t.run_id and r.source = ${account.source} and r.source_account = ${account.sourceAccount}
       and r.status = 'running' and t.status = 'pending' and t.available_at < ${retryAt.toISOString()}::timestamptz
    returning t.id`);
  return rows.length;
}

/**
 * A worker's grace time ran out with these attempts still running (a fetch or a window that did
 * not end in time): it gives them back before it closes, so another worker resumes them at once
 * instead of after the reaper's stale threshold. The same end as handBackTask — pending, cursor
 * and committed windows intact, the attempt not counted — fenced on each claim's token, so a task
 * that finished or was handed on meanwhile is left alone. dispatched_at is cleared: the worker is
 * closing and its naks may not arrive, so the dispatcher publishes these again. The lock timeout
 * bounds the wait for a window still committing on the task's row; a task not handed back in time
 * is left to the reaper. (Belongs with the task state module once the statements move there.)
 */
export async function handBackHeldTasks(
  db: Db,
  claims: readonly { taskId: number; claimToken: string }[],
  lockTimeoutMs = 2_000,
): Promise<number[]> {
  if (claims.length === 0) return [];
  const rows = await db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true)`);
    return tx.execute<{ id: string }>(sql`
      update drover.tasks t
         set status = 'pending', attempts = greatest(t.attempts - 1, 0), locked_by = null, locked_at = null,
             dispatched_at = null, available_at = now(), updated_at = now()
        from unnest(${sql.param(claims.map((c) => c.taskId))}::bigint[], ${sql.param(claims.map((c) => c.claimToken))}::text[]) as held(id, token)
       where t.id = held.id and t.status = 'running' and t.locked_by = held.token
      returning t.id`);
  });
  return rows.map((r) => Number(r.id));
}
