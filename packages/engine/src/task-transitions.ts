import { type Db, executePrepared, type Queryable, runStatus, type TaskRow, taskStatus } from "@drover/db";
import type { TaskSeed } from "@drover/provider-sdk";
import { type SQL, sql } from "drizzle-orm";
import { toTaskRow } from "./task-row.js";

/**
 * A task's state machine, every statement that moves one. A task is seeded pending, published
 * (dispatched_at set; what is published when is task-dispatch.ts), claimed (running, under a claim
 * token), and ends its attempt as succeeded, failed or cancelled, or goes back to pending (released, parked, handed back, or released by the
 * reaper when its worker died). A stop cancels what is still pending; a resume or retry puts
 * cancelled or failed tasks back to pending. Every statement of an attempt is fenced on
 * (status = 'running', locked_by = claim token): only the attempt that holds the claim moves the
 * task, so a late zombie changes nothing. Each returns whether (or how many) rows its fence let through.
 */

/**
 * Inserts tasks. The (run_id, seed_key) unique index makes seeding idempotent: a phase or stripe
 * successor seeded twice (a retried finish, two finishers) yields one task.
 */
export async function insertTaskSeeds(
  q: Queryable,
  runId: string,
  phase: number,
  seeds: readonly TaskSeed[],
  options: { availableAt?: Date } = {},
): Promise<number> {
  if (seeds.length === 0) return 0;
  let inserted = 0;
  // A follow pass is seeded when the previous one ends, not claimable before its start.
  const availableAt = options.availableAt
    ? sql`${options.availableAt.toISOString()}::timestamptz`
    : sql`now()`;
  // Chunked: one statement per 500 seeds keeps parameters well under Postgres's 65535 limit.
  for (let i = 0; i < seeds.length; i += 500) {
    const chunk = seeds.slice(i, i + 500);
    const rows = await q.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor, available_at)
      select ${runId}::uuid, s.kind, ${phase}, s.seed_key, s.cursor, ${availableAt}
        from jsonb_to_recordset(${JSON.stringify(chunk.map((s) => ({ kind: s.kind, seed_key: s.seedKey, cursor: s.cursor })))}::jsonb)
             as s(kind text, seed_key text, cursor jsonb)
      on conflict (run_id, seed_key) do nothing
      returning id`);
    inserted += rows.length;
  }
  return inserted;
}

/**
 * Claims a pending task for one worker. Racers all issue this UPDATE; `status = 'pending'` is the
 * fence, so exactly one of them gets the row back and may run it. The run must still be running:
 * a claim can never slip in after a stop was requested. `claimToken` is unique per claim, and every
 * later write of this attempt (checkpoint, finish) is fenced on it, so a worker the reaper gave up
 * on can never overwrite the attempt that replaced it.
 *
 * With `worker` (the claimer's liveness record, drover.workers), the claim is also fenced on that
 * record being alive, and names it on the task: a worker the reaper declared dead (a frozen process
 * that came back) can take nothing new under that record, and every task it holds is one the reaper
 * can release the moment the record expires. Such a refusal throws DeadWorkerError rather than
 * answering "not claimed": the task is still pending and its message must come back, not be acked.
 */
export async function claimTask(
  q: Queryable,
  taskId: number,
  claimToken: string,
  worker?: string,
): Promise<TaskRow | undefined> {
  // Prepared, like a window's statements: every task runs it, in the lane's time between tasks.
  const rows = await executePrepared(
    q,
    sql`
    update drover.tasks t
       set status = ${taskStatus.running}, attempts = t.attempts + 1,
           attempts_since_progress = t.attempts_since_progress + 1, locked_by = ${claimToken}, locked_at = now(),
           worker = ${worker ?? null}::uuid,
           started_at = coalesce(t.started_at, now()), updated_at = now()
     where t.id = ${taskId} and t.status = ${taskStatus.pending} and t.available_at <= now()
       and exists (select 1 from drover.runs r where r.id = t.run_id and r.status = ${runStatus.running})
       ${worker === undefined ? sql`` : sql`and exists (select 1 from drover.workers w where w.id = ${worker}::uuid and w.expires_at > now())`}
    returning t.*`,
  );
  const row = rows[0];
  if (row) return toTaskRow(row);
  if (worker !== undefined) {
    const [alive] = await q.execute(sql`
      select 1 from drover.workers where id = ${worker}::uuid and expires_at > now()`);
    if (!alive) throw new DeadWorkerError(worker);
  }
  return undefined;
}

/** The claimer's liveness record has expired or is gone: it may claim nothing until it registers again. */
export class DeadWorkerError extends Error {
  constructor(readonly worker: string) {
    super(`worker record ${worker} is not alive; the worker must register again before it claims`);
    this.name = "DeadWorkerError";
  }
}

/** Keeps a long task's lock fresh between windows, so the reaper does not mistake it for a dead worker's. */
export async function touchTask(q: Queryable, taskId: number, claimToken: string): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks set locked_at = now()
     where id = ${taskId} and status = ${taskStatus.running} and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

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
  /**
   * The source ids of a listing (a page, a deal's messages) whose last window this is: appended to
   * the task's listed_ids, so what the import listed commits with the rows it names.
   */
  listed?: readonly string[];
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
  // Prepared: every window runs it (db prepared.ts).
  const rows = await executePrepared(
    q,
    sql`
    with ${checkpointMoves(taskId, claimToken, c)}
    select id from moved`,
  );
  if (rows.length !== 1) throw new LostClaimError(taskId);
}

/**
 * The checkpoint as the CTEs `moved` (the task's row, fenced on the claim token and on `gate` when
 * given; returns id, run_id) and `logged` (its window_commits row), for writeCheckpoint and for the
 * statements that move a task past rows without a window of their own (held-page.ts).
 */
export function checkpointMoves(taskId: number, claimToken: string, c: Checkpoint, gate?: SQL): SQL {
  // Every row the window accounted for, already-here rows included: the run's throughput. A re-run
  // finds nearly everything already here, and its chart must show that work, not only the misses.
  const d = c.statsDelta;
  const written =
    (d.created ?? 0) + (d.matched ?? 0) + (d.already_here ?? 0) + (d.skipped ?? 0) + (d.failed ?? 0);
  return sql`
    moved as (
      update drover.tasks t
         set processed_offset = ${c.processedOffset},
             cursor = coalesce(${c.cursor ? JSON.stringify(c.cursor) : null}::jsonb, t.cursor),
             stats = (select coalesce(jsonb_object_agg(k, coalesce((t.stats ->> k)::bigint, 0) + coalesce((d.delta ->> k)::bigint, 0)), '{}'::jsonb)
                        from (select ${JSON.stringify(c.statsDelta)}::jsonb as delta) d,
                             jsonb_object_keys(t.stats || d.delta) as k),
             rows_read = t.rows_read + ${c.rowsRead ?? 0}, rows_written = t.rows_written + ${c.rowsWritten ?? 0},
             listed_ids = case when ${c.listed ? 1 : 0}::int = 1
                               then coalesce(t.listed_ids, '{}') || ${sql.param(c.listed ? [...c.listed] : [])}::text[]
                               else t.listed_ids end,
             -- A committed window is progress: the reaper's count of attempts whose worker died
             -- starts again from it (releaseStaleTasks).
             attempts_since_progress = 0,
             locked_at = now(), updated_at = now()
       where t.id = ${taskId} and t.status = ${taskStatus.running} and t.locked_by = ${claimToken}
         and ${gate ?? sql`true`}
      returning t.id, t.run_id),
    logged as (
      insert into drover.window_commits (run_id, task_id, rows)
      select run_id, id, ${written} from moved where ${written}::int > 0)`;
}

/**
 * Success, together with the successors the task seeds (the next page of its stripe). A task that
 * listed nothing (an empty page, deals without mail) ends with an empty listing rather than none,
 * so verification can tell "listed nothing" from a task of a version that kept no listing.
 */
export async function finishTaskSucceeded(
  q: Queryable,
  task: { id: number; runId: string; phase: number },
  claimToken: string,
  successors: readonly TaskSeed[] = [],
  statsDelta: Record<string, number> = {},
): Promise<boolean> {
  // statsDelta: what the attempt counted after its last checkpoint (the source calls of a last
  // fetch that wrote nothing), added like a checkpoint's.
  // Prepared: every task runs it, in the lane's time between tasks.
  const rows = await executePrepared(
    q,
    sql`
    update drover.tasks t
       set status = ${taskStatus.succeeded}, finished_at = now(), locked_by = null, last_error = null, updated_at = now(),
           listed_ids = coalesce(t.listed_ids, '{}'),
           stats = (select coalesce(jsonb_object_agg(k, coalesce((t.stats ->> k)::bigint, 0) + coalesce((d.delta ->> k)::bigint, 0)), '{}'::jsonb)
                      from (select ${JSON.stringify(statsDelta)}::jsonb as delta) d,
                           jsonb_object_keys(t.stats || d.delta) as k)
     where t.id = ${task.id} and t.status = ${taskStatus.running} and t.locked_by = ${claimToken}
    returning id`,
  );
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
       set status = ${taskStatus.failed}, finished_at = now(), locked_by = null, last_error = ${error}, updated_at = now()
     where id = ${taskId} and status = ${taskStatus.running} and locked_by = ${claimToken}
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
       set status = ${taskStatus.cancelled}, finished_at = now(), locked_by = null, updated_at = now()
     where id = ${taskId} and status = ${taskStatus.running} and locked_by = ${claimToken}
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
       set status = ${taskStatus.pending}, locked_by = null, locked_at = null, dispatched_at = null, last_error = ${error},
           available_at = now() + make_interval(secs => ${delayMs / 1000}), updated_at = now()
     where id = ${taskId} and status = ${taskStatus.running} and locked_by = ${claimToken}
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
       set status = ${taskStatus.pending}, attempts = greatest(attempts - 1, 0),
           attempts_since_progress = greatest(attempts_since_progress - 1, 0), locked_by = null, locked_at = null,
           dispatched_at = null, last_error = ${reason}, available_at = ${retryAt.toISOString()}::timestamptz,
           updated_at = now()
     where id = ${taskId} and status = ${taskStatus.running} and locked_by = ${claimToken}
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
  account: { id?: string; source: string; sourceAccount: string },
  retryAt: Date,
  /** "run": the wall is the run's alone (its daily share is spent), the account's other runs go on. */
  scope: "account" | "run" = "account",
): Promise<number> {
  const onlyRun = scope === "run" && account.id ? sql`and r.id = ${account.id}::uuid` : sql``;
  const rows = await q.execute(sql`
    update drover.tasks t set available_at = ${retryAt.toISOString()}::timestamptz, dispatched_at = null, updated_at = now()
      from drover.runs r
     where r.id = t.run_id and r.source = ${account.source} and r.source_account = ${account.sourceAccount} ${onlyRun}
       and r.status = ${runStatus.running} and t.status = ${taskStatus.pending} and t.available_at < ${retryAt.toISOString()}::timestamptz
    returning t.id`);
  return rows.length;
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
       set status = ${taskStatus.pending}, attempts = greatest(attempts - 1, 0),
           attempts_since_progress = greatest(attempts_since_progress - 1, 0), locked_by = null, locked_at = null,
           dispatched_at = now(), available_at = now(), updated_at = now()
     where id = ${taskId} and status = ${taskStatus.running} and locked_by = ${claimToken}
    returning id`);
  return rows.length === 1;
}

/**
 * A worker's grace time ran out with these attempts still running (a fetch or a window that did
 * not end in time): it gives them back before it closes, so another worker resumes them at once
 * instead of after the reaper's stale threshold. The same end as handBackTask — pending, cursor
 * and committed windows intact, the attempt not counted — fenced on each claim's token, so a task
 * that finished or was handed on meanwhile is left alone. dispatched_at is cleared: the worker is
 * closing and its naks may not arrive, so the dispatcher publishes these again. The lock timeout
 * bounds the wait for a window still committing on the task's row; a task not handed back in time
 * is left to the reaper.
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
         set status = ${taskStatus.pending}, attempts = greatest(t.attempts - 1, 0),
             attempts_since_progress = greatest(t.attempts_since_progress - 1, 0), locked_by = null, locked_at = null,
             dispatched_at = null, available_at = now(), updated_at = now()
        from unnest(${sql.param(claims.map((c) => c.taskId))}::bigint[], ${sql.param(claims.map((c) => c.claimToken))}::text[]) as held(id, token)
       where t.id = held.id and t.status = ${taskStatus.running} and t.locked_by = held.token
      returning t.id`);
  });
  return rows.map((r) => Number(r.id));
}

/** A pending task of a stopping run never starts: it is cancelled where it stands. */
export async function cancelPendingTask(q: Queryable, taskId: number): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.tasks set status = ${taskStatus.cancelled}, finished_at = now(), updated_at = now()
     where id = ${taskId} and status = ${taskStatus.pending}
    returning id`);
  return rows.length === 1;
}

/**
 * A stop: the pending tasks of a stopping run are cancelled where they stand (a resume puts them
 * back). Fenced on the run being stopping. Running ones are not touched; they see the stop between
 * windows and cancel themselves.
 */
export async function cancelPendingTasksOfRun(q: Queryable, runId: string): Promise<number> {
  const rows = await q.execute(sql`
    update drover.tasks t set status = ${taskStatus.cancelled}, finished_at = now(), updated_at = now()
     where t.run_id = ${runId}::uuid and t.status = ${taskStatus.pending}
       and exists (select 1 from drover.runs r where r.id = t.run_id and r.status = ${runStatus.stopping})
    returning t.id`);
  return rows.length;
}

/**
 * The reaper's release of tasks whose worker died: a running task whose lock has not moved for
 * `staleMs` goes back to pending, cursor intact, or fails once `maxAttempts` attempts in a row
 * ended so without committing a window (a task that kills its worker every time must not loop
 * forever; a long walk whose workers die after it moved on, at restarts and deploys, is not that
 * task: every committed window starts the count again). Fenced on the lock's age, which every
 * checkpoint and touch of a live attempt refreshes; the attempt's own later writes then find its
 * claim token gone and change nothing.
 */
export async function releaseStaleTasks(
  q: Queryable,
  options: { staleMs: number; maxAttempts: number },
): Promise<{ released: number; failed: number }> {
  const { staleMs, maxAttempts } = options;
  const rows = await q.execute<{ status: string }>(sql`
    update drover.tasks
       set status = case when attempts_since_progress >= ${maxAttempts} then ${taskStatus.failed} else ${taskStatus.pending} end,
           last_error = case when attempts_since_progress >= ${maxAttempts}
                             then 'its worker stopped responding on every attempt' else 'its worker stopped responding' end,
           finished_at = case when attempts_since_progress >= ${maxAttempts} then now() end,
           locked_by = null, locked_at = null, dispatched_at = null, available_at = now(), updated_at = now()
     where status = ${taskStatus.running} and locked_at < now() - make_interval(secs => ${staleMs / 1000})
    returning status`);
  return {
    released: rows.filter((t) => t.status === "pending").length,
    failed: rows.filter((t) => t.status === "failed").length,
  };
}

/**
 * The reaper's release of the tasks of dead workers, without waiting for their locks to go stale:
 * a running task whose claim names a liveness record that has expired or is gone goes back to
 * pending, cursor intact, or fails once it has used `maxAttempts` (as releaseStaleTasks). A live
 * worker's record never expires while its process runs (it is moved forward every few seconds,
 * however long a fetch or window takes), so this takes only what nobody works on; and a worker
 * that was frozen past its expiry and comes back finds its claim tokens gone, its record dead
 * (heartbeatWorker refuses to revive it) and its claims refused. Expired records are deleted in
 * the same statement. A task whose row is locked (a frozen worker stopped inside a window's
 * transaction) is skipped rather than waited for, so one frozen worker never stalls the reaper; the
 * server ends that transaction at its idle deadline and a later pass releases the task. Tasks
 * claimed without a record (workers of an older version) are left to releaseStaleTasks. Returns
 * the ids (DROVER_WORKER_ID) of the workers declared dead.
 */
export async function releaseTasksOfDeadWorkers(
  q: Queryable,
  options: { maxAttempts: number },
): Promise<{ released: number; failed: number; deadWorkers: string[] }> {
  const { maxAttempts } = options;
  const rows = await q.execute<{ what: string; status: string | null; worker_id: string | null }>(sql`
    with orphaned as (
      select t.id from drover.tasks t
       where t.status = ${taskStatus.running} and t.worker is not null
         and not exists (select 1 from drover.workers w where w.id = t.worker and w.expires_at > now())
       for update of t skip locked),
    released as (
      update drover.tasks t
         set status = case when t.attempts_since_progress >= ${maxAttempts} then ${taskStatus.failed} else ${taskStatus.pending} end,
             last_error = case when t.attempts_since_progress >= ${maxAttempts}
                               then 'its worker stopped responding on every attempt' else 'its worker stopped responding' end,
             finished_at = case when t.attempts_since_progress >= ${maxAttempts} then now() end,
             locked_by = null, locked_at = null, dispatched_at = null, available_at = now(), updated_at = now()
        from orphaned
       where t.id = orphaned.id and t.status = ${taskStatus.running}
      returning t.status),
    dead as (
      delete from drover.workers w where w.expires_at <= now() returning w.worker_id)
    select 'task' as what, status, null as worker_id from released
    union all
    select 'worker', null, worker_id from dead`);
  return {
    released: rows.filter((r) => r.what === "task" && r.status === "pending").length,
    failed: rows.filter((r) => r.what === "task" && r.status === "failed").length,
    deadWorkers: rows.filter((r) => r.what === "worker").map((r) => r.worker_id!),
  };
}

/**
 * A resume (cancelled tasks) or retry (failed tasks, attempts afresh): the run's tasks in `from`
 * go back to pending, cursor intact, due at once. Returns the lowest phase that has work again, the
 * phase the run's barrier must rewind to, or undefined when no task moved.
 */
export async function rearmTasks(
  q: Queryable,
  runId: string,
  from: "cancelled" | "failed",
  options: { resetAttempts: boolean },
): Promise<number | undefined> {
  const [lowest] = await q.execute<{ phase: number | null }>(sql`
    with rearmed as (
      update drover.tasks
         set status = ${taskStatus.pending}, available_at = now(), dispatched_at = null, locked_by = null,
             finished_at = null, updated_at = now()
             ${options.resetAttempts ? sql`, attempts = 0, attempts_since_progress = 0` : sql``}
       where run_id = ${runId}::uuid and status = ${from}
      returning phase)
    select min(phase) as phase from rearmed`);
  return lowest?.phase === null || lowest?.phase === undefined ? undefined : Number(lowest.phase);
}
