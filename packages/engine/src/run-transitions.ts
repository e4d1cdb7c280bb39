import {
  type Db,
  FINISHED_RUN_STATUSES,
  type FollowPass,
  OPEN_TASK_STATUSES,
  type Queryable,
  type RunFollow,
  type RunRow,
  type RunSummary,
  runStatus,
  runStatusIn,
  runs,
  taskStatus,
  taskStatusIn,
} from "@drover/db";
import { type Provider, REDRIVE_SEED_KEY_PREFIX, type TaskSeed } from "@drover/provider-sdk";
import { eq, sql } from "drizzle-orm";
import { LiveRunConflict, takingLiveRunSlot } from "./live-run-conflict.js";
import { refuseClosedMigration } from "./migration-closures.js";
import { revertPlan, revertSeeds } from "./revert.js";
import { toRunInfo } from "./run-info.js";
import { seedContext } from "./source-capabilities.js";
import { cancelPendingTasksOfRun, insertTaskSeeds, rearmTasks } from "./task-transitions.js";

/**
 * A run's state machine, every statement that moves one. A run is admitted running, its barrier
 * advances phase by phase, and it finalizes as succeeded or failed; a stop makes it stopping and
 * then stopped once nothing of it runs; a resume (stopped) or retry (failed) makes it running
 * again with its barrier rewound; past retention its tasks are pruned and its counts frozen.
 * Each statement is fenced on the status it leaves, so two coordinators (or a coordinator and the
 * reaper) racing on one run move it once.
 */

export interface NewRun {
  /** Chosen before the insert: the source secret is sealed to it. */
  id: string;
  tenantId: string;
  source: string;
  sourceAccount: string;
  kinds: string[];
  plan: string[][];
  sourceConfig: Record<string, unknown>;
  /** The source credential, already encrypted; never the plaintext. */
  sourceSecretCiphertext: string | null;
  sourceSecretKeyId: string | null;
  traceContext: Record<string, string>;
  /** The run's share of the account's daily allowance; null: no cap of its own. */
  dailyShare?: number | null;
  /** Follow the source until cutover, a pass every `intervalSeconds`; absent: finish after the import. */
  follow?: { intervalSeconds: number };
  /** Walks the source and writes nothing (dry-run.ts); holds no admission slot. */
  dryRun?: boolean;
}

/**
 * Admits a run and seeds its first phase in one transaction. One live run per tenant and source
 * account is enforced by the partial unique index runs_one_live_per_source, so of two admissions at
 * the same instant one fails with LiveRunConflict (takingLiveRunSlot).
 */
export async function admitRun(db: Db, provider: Provider, input: NewRun): Promise<RunRow> {
  return takingLiveRunSlot(db, { scope: input }, () => admitRunOnce(db, provider, input));
}

async function admitRunOnce(db: Db, provider: Provider, input: NewRun): Promise<RunRow> {
  return db.transaction(async (tx) => {
    // A closed account's ledger is about to go: no run writes against it (migration-closures.ts).
    if (!input.dryRun) await refuseClosedMigration(tx, input);
    const [run] = await tx
      .insert(runs)
      .values({
        ...input,
        follow: input.follow
          ? { intervalSeconds: input.follow.intervalSeconds, cutoverAt: null, passes: [] }
          : null,
        status: "running",
        startedAt: new Date(),
      })
      .returning();
    const seeds = await provider.seedPhase(seedContext(tx, toRunInfo(run!), 0, input.plan[0] ?? []));
    await insertTaskSeeds(tx, run!.id, 0, seeds);
    return run!;
  });
}

/** A second revert of one run: `revertedBy` is the revert admitted first (runs_reverts_run). */
export class RunAlreadyReverted extends Error {
  constructor(
    readonly runId: string,
    readonly revertedBy: string,
  ) {
    super(`run ${runId} is already reverted by run ${revertedBy}`);
    this.name = "RunAlreadyReverted";
  }
}

/**
 * Admits a revert run of `target` and seeds its first phase in one transaction (revert.ts). It
 * takes the tenant's live-run slot for the target's source account like any run, so nothing writes
 * that tenant from that account while the revert removes records (a conflict fails with
 * LiveRunConflict), and runs_reverts_run makes a second revert of one run fail the same way, which
 * becomes RunAlreadyReverted once the first revert is found. It calls no source: no credential is
 * kept on it.
 */
export async function admitRevertRun(
  db: Db,
  target: RunRow,
  input: { id: string; force: boolean; traceContext: Record<string, string> },
): Promise<RunRow> {
  try {
    return await takingLiveRunSlot(db, { scope: target }, () => admitRevertRunOnce(db, target, input));
  } catch (err) {
    if (!(err instanceof LiveRunConflict)) throw err;
    const [by] = await db.select({ id: runs.id }).from(runs).where(eq(runs.revertsRunId, target.id));
    throw by ? new RunAlreadyReverted(target.id, by.id) : err;
  }
}

async function admitRevertRunOnce(
  db: Db,
  target: RunRow,
  input: { id: string; force: boolean; traceContext: Record<string, string> },
): Promise<RunRow> {
  return db.transaction(async (tx) => {
    const plan = revertPlan(target);
    const [run] = await tx
      .insert(runs)
      .values({
        id: input.id,
        tenantId: target.tenantId,
        source: target.source,
        sourceAccount: target.sourceAccount,
        kinds: plan.flat(),
        plan,
        sourceConfig: target.sourceConfig,
        traceContext: input.traceContext,
        revertsRunId: target.id,
        revertForce: input.force,
        status: "running",
        startedAt: new Date(),
      })
      .returning();
    await insertTaskSeeds(tx, run!.id, 0, revertSeeds(plan[0] ?? []));
    return run!;
  });
}

/**
 * Whether the run is running with tasks of its current phase still open: its barrier cannot pass,
 * so progressRun has nothing to do. One read, no transaction and no lock on the run's row: what
 * most calls find (every task's end but the phase's last, every reaper pass over a busy run), and
 * what they paid four round trips and the run's whole row for. A task ending after this read asks
 * again itself, having committed its end before it asks.
 */
export async function phaseStillOpen(q: Queryable, runId: string): Promise<boolean> {
  const [row] = await q.execute<{ open: boolean }>(sql`
    select exists (select 1 from drover.tasks t
                    where t.run_id = r.id and t.phase = r.current_phase and t.status in ${taskStatusIn(OPEN_TASK_STATUSES)}) as open
      from drover.runs r where r.id = ${runId}::uuid and r.status = ${runStatus.running}`);
  return row?.open === true;
}

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
     where r.id = ${runId}::uuid and r.current_phase = ${phase} and r.status = ${runStatus.running}
       and not exists (select 1 from drover.tasks t
                        where t.run_id = r.id and t.phase = ${phase} and t.status in ${taskStatusIn(OPEN_TASK_STATUSES)})
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
       set status = case when exists (select 1 from drover.tasks t where t.run_id = r.id and t.status = ${taskStatus.failed})
                         then ${runStatus.failed} else ${runStatus.succeeded} end,
           error = (select case when count(*) > 0 then count(*) || ' task(s) failed; first: ' || min(t.last_error) end
                      from drover.tasks t where t.run_id = r.id and t.status = ${taskStatus.failed}),
           finished_at = now(), updated_at = now(), verification = null
     where r.id = ${runId}::uuid and r.status = ${runStatus.running} and r.current_phase >= jsonb_array_length(r.plan)
    returning r.status`);
  return rows[0]?.status;
}

/**
 * A stopping run becomes stopped once nothing of it runs: fenced on NOT EXISTS running tasks,
 * so a task still committing its last window keeps the run in stopping.
 */
export async function settleStoppingRun(q: Queryable, runId: string): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.runs r set status = ${runStatus.stopped}, finished_at = now(), updated_at = now(), verification = null
     where r.id = ${runId}::uuid and r.status = ${runStatus.stopping}
       and not exists (select 1 from drover.tasks t where t.run_id = r.id and t.status = ${taskStatus.running})
    returning r.id`);
  return rows.length === 1;
}

/**
 * A stop: a pending or running run becomes stopping, and its pending tasks are cancelled where they
 * stand. The claim is fenced on the run being 'running', so once this commits no task starts; the
 * ones running see the stop between windows, and settleStoppingRun ends the run after them.
 * Returns whether this call moved the run (false when it was already stopping or finished).
 */
export async function requestStop(db: Db, runId: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const moved = await tx.execute(sql`
      update drover.runs set status = ${runStatus.stopping}, updated_at = now()
       where id = ${runId}::uuid and status in ${runStatusIn(["pending", "running"])}
      returning id`);
    await cancelPendingTasksOfRun(tx, runId);
    return moved.length === 1;
  });
}

/**
 * Resume and retry are one transition: a run in `from` (stopped, failed) that was not pruned is
 * running again, its cancelled (resume) or failed (retry) tasks pending again, and its barrier
 * rewound to the lowest phase with work again, from where it re-advances. Fenced on the run's status:
 * of two racing resumes one moves it. Back to running first: the partial unique index re-checks
 * admission, and a live sibling makes this fail with LiveRunConflict. Returns whether the run moved.
 */
export async function rearmRun(
  db: Db,
  runId: string,
  how: { from: "stopped" | "failed"; tasksFrom: "cancelled" | "failed"; resetAttempts: boolean },
): Promise<boolean> {
  return takingLiveRunSlot(db, { runId }, () => rearmRunOnce(db, runId, how));
}

async function rearmRunOnce(
  db: Db,
  runId: string,
  how: { from: "stopped" | "failed"; tasksFrom: "cancelled" | "failed"; resetAttempts: boolean },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const moved = await tx.execute(sql`
      update drover.runs set status = ${runStatus.running}, error = null, finished_at = null, updated_at = now()
       where id = ${runId}::uuid and status = ${how.from} and summary is null
      returning id`);
    if (moved.length === 0) return false;
    const lowest = await rearmTasks(tx, runId, how.tasksFrom, { resetAttempts: how.resetAttempts });
    if (lowest !== undefined) await rewindBarrier(tx, runId, lowest);
    await startOpenPassNow(tx, runId);
    return true;
  });
}

/**
 * A re-armed task is due at once (rearmTasks), so a follow pass that was waiting for its start may
 * now begin earlier than recorded: its start moves to now, since the next pass asks for
 * updated_since = this start and must not begin after the moment this one first listed.
 */
async function startOpenPassNow(q: Queryable, runId: string): Promise<void> {
  const [row] = await q.execute<{ follow: RunFollow | null; now_ms: number }>(sql`
    select follow, (extract(epoch from now()) * 1000)::float8 as now_ms
      from drover.runs where id = ${runId}::uuid and follow is not null for update`);
  const open = row?.follow?.passes.at(-1);
  if (!row?.follow || !open || open.finishedAt !== null) return;
  const now = new Date(Number(row.now_ms)).toISOString();
  if (open.startsAt <= now) return;
  open.startsAt = now;
  await q.execute(
    sql`update drover.runs set follow = ${JSON.stringify(row.follow)}::jsonb where id = ${runId}::uuid`,
  );
}

/** What closing a follow run's pass over the closing phase led to. */
export type FollowStep =
  /** The pass still has tasks pending or running (or the run is not following on this phase). */
  | { kind: "busy" }
  /** The pass closed and the next one is open: seed it, due at `pass.startsAt`. */
  | { kind: "next"; pass: FollowPass }
  /** The pass closed and was the last (it started at or after the cutover): the barrier may pass. */
  | { kind: "last" };

/**
 * Closes the open pass of a follow run whose barrier stands on its closing phase (the catch-up),
 * once nothing of that phase is pending or running, and opens the next one: updated_since = the
 * closed pass's start, due one interval after that start (at once after a cutover). The first call
 * finds no pass recorded: the open pass is the import's own catch-up, seeded with the phase.
 * Fenced by the run row's lock (FOR UPDATE, then the phase's tasks read under a fresh snapshot):
 * of finishers racing here one closes the pass and seeds the next, the others then see its task
 * pending and are busy. A pass is the last only when it started at or after the cutover request,
 * so everything the customer changed before cutover is read by a pass that began after it.
 */
export async function closeFollowPass(q: Queryable, runId: string, phase: number): Promise<FollowStep> {
  // Most calls (every task's finish, every reaper pass) find the pass still going: they answer so
  // without taking the run row's lock.
  const [going] = await q.execute(sql`
    select 1 from drover.tasks
     where run_id = ${runId}::uuid and phase = ${phase} and status in ${taskStatusIn(OPEN_TASK_STATUSES)} limit 1`);
  if (going) return { kind: "busy" };
  const [locked] = await q.execute<{ follow: RunFollow | null; started_at: Date | string | null }>(sql`
    select follow, started_at from drover.runs
     where id = ${runId}::uuid and status = ${runStatus.running} and current_phase = ${phase} and follow is not null
       for update`);
  if (!locked?.follow) return { kind: "busy" };
  const follow = locked.follow;
  const [state] = await q.execute<{ busy: boolean; first_ms: number | null; now_ms: number }>(sql`
    select exists (select 1 from drover.tasks t
                    where t.run_id = ${runId}::uuid and t.phase = ${phase} and t.status in ${taskStatusIn(OPEN_TASK_STATUSES)}) as busy,
           (select floor(extract(epoch from min(t.created_at)) * 1000)::float8 from drover.tasks t
             where t.run_id = ${runId}::uuid and t.phase = ${phase}) as first_ms,
           (extract(epoch from now()) * 1000)::float8 as now_ms`);
  if (!state || state.busy) return { kind: "busy" };
  const nowMs = Number(state.now_ms);
  const now = new Date(nowMs).toISOString();
  if (follow.passes.length === 0) {
    const seeded = new Date(state.first_ms === null ? nowMs : Number(state.first_ms)).toISOString();
    const runStart = locked.started_at
      ? new Date(locked.started_at).toISOString()
      : new Date(0).toISOString();
    follow.passes.push({
      index: 0,
      since: runStart,
      seededAt: seeded,
      startsAt: seeded,
      finishedAt: null,
      changes: null,
    });
  }
  const open = follow.passes.at(-1)!;
  // Deletions (and restorations) found by the pass's sweep are changes it applied too.
  const [changed] = await q.execute<{ changes: number | string; deletions: number | string }>(sql`
    select coalesce(sum(coalesce((t.stats ->> 'created')::bigint, 0) + coalesce((t.stats ->> 'already_here')::bigint, 0)
                      + coalesce((t.stats ->> 'matched')::bigint, 0) + coalesce((t.stats ->> 'skipped')::bigint, 0)
                      + coalesce((t.stats ->> 'failed')::bigint, 0) + coalesce((t.stats ->> 'deleted')::bigint, 0)
                      + coalesce((t.stats ->> 'restored')::bigint, 0)), 0) as changes,
           coalesce(sum(coalesce((t.stats ->> 'deleted')::bigint, 0) + coalesce((t.stats ->> 'restored')::bigint, 0)), 0) as deletions
      from drover.tasks t
     where t.run_id = ${runId}::uuid and t.phase = ${phase} and t.created_at >= ${open.seededAt}::timestamptz`);
  open.finishedAt = now;
  open.changes = Number(changed?.changes ?? 0);
  open.deletions = Number(changed?.deletions ?? 0);
  const last = follow.cutoverAt !== null && open.startsAt >= follow.cutoverAt;
  let next: FollowPass | undefined;
  if (!last) {
    const dueMs =
      follow.cutoverAt !== null
        ? nowMs
        : Math.max(nowMs, Date.parse(open.startsAt) + passIntervalSeconds(follow) * 1000);
    next = {
      index: open.index + 1,
      since: open.startsAt,
      seededAt: now,
      startsAt: new Date(dueMs).toISOString(),
      finishedAt: null,
      changes: null,
    };
    follow.passes.push(next);
  }
  await q.execute(sql`
    update drover.runs set follow = ${JSON.stringify(follow)}::jsonb, updated_at = now() where id = ${runId}::uuid`);
  return next ? { kind: "next", pass: next } : { kind: "last" };
}

/**
 * Seconds from one pass's start to the next's: the interval asked for, or with the source's
 * webhooks feeding the run, the rare reconcile (passes then only catch what events cannot: a
 * ban's lost events, missed deliveries, mail), unless the interval asked for is longer.
 */
export function passIntervalSeconds(follow: RunFollow): number {
  const reconcile = follow.feed?.mode === "webhooks" ? follow.feed.reconcileSeconds : null;
  return reconcile ? Math.max(follow.intervalSeconds, reconcile) : follow.intervalSeconds;
}

/**
 * CompleteRun: asks a follow run to cut over. Fenced on the run following, not finished
 * successfully or failed, and not asked before (a second call changes nothing and returns false).
 * An open pass still waiting for its start is due now (its tasks too), so it is the final pass; a
 * pass already under way finishes, and one more pass, begun after this moment, follows it.
 */
export async function requestCutover(db: Db, runId: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const [row] = await tx.execute<{ follow: RunFollow; now_ms: number }>(sql`
      select follow, (extract(epoch from now()) * 1000)::float8 as now_ms from drover.runs
       where id = ${runId}::uuid and follow is not null and (follow ->> 'cutoverAt') is null
         and status in ${runStatusIn(["pending", "running", "stopping", "stopped"])}
         for update`);
    if (!row) return false;
    const now = new Date(Number(row.now_ms)).toISOString();
    row.follow.cutoverAt = now;
    const open = row.follow.passes.at(-1);
    if (open && open.finishedAt === null && open.startsAt > now) {
      open.startsAt = now;
      await tx.execute(sql`
        update drover.tasks set available_at = now(), updated_at = now()
         where run_id = ${runId}::uuid and status = ${taskStatus.pending} and available_at > now()
           and created_at >= ${open.seededAt}::timestamptz`);
    }
    await tx.execute(sql`
      update drover.runs set follow = ${JSON.stringify(row.follow)}::jsonb, updated_at = now() where id = ${runId}::uuid`);
    return true;
  });
}

/**
 * Re-drive: a finished run (succeeded or failed, not pruned) is running again with `seeds` (tasks
 * reading chosen rows again) in its last phase, and its barrier back on that phase so the run
 * finalizes again once they end. Its failed tasks stay failed: a re-drive reads only the rows asked
 * for, so a run that failed still ends failed. Fenced on the status like a retry (of two racing
 * re-drives one moves the run; the other's seeds are never written), and back to running first so
 * the partial unique index re-checks admission: a live sibling makes this fail with
 * LiveRunConflict. Returns whether the run moved.
 */
export async function redriveRun(q: Db, runId: string, seeds: readonly TaskSeed[]): Promise<boolean> {
  // The task runner knows a re-drive task by its key (a still-bad row does not fail it).
  const unmarked = seeds.find((s) => !s.seedKey.startsWith(REDRIVE_SEED_KEY_PREFIX));
  if (unmarked)
    throw new Error(`re-drive seed ${unmarked.seedKey} does not begin with ${REDRIVE_SEED_KEY_PREFIX}`);
  return takingLiveRunSlot(q, { runId }, () => redriveRunOnce(q, runId, seeds));
}

async function redriveRunOnce(q: Db, runId: string, seeds: readonly TaskSeed[]): Promise<boolean> {
  return q.transaction(async (tx) => {
    const [moved] = await tx.execute<{ last: number }>(sql`
      update drover.runs
         set status = ${runStatus.running}, error = null, finished_at = null, verification = null,
             current_phase = jsonb_array_length(plan) - 1, updated_at = now()
       where id = ${runId}::uuid and status in ${runStatusIn(["succeeded", "failed"])} and summary is null
      returning current_phase as last`);
    if (!moved) return false;
    await insertTaskSeeds(tx, runId, Number(moved.last), seeds);
    return true;
  });
}

/** Moves the barrier back to `phase` (never forward): a re-armed task there must run again. */
async function rewindBarrier(q: Queryable, runId: string, phase: number): Promise<void> {
  await q.execute(sql`
    update drover.runs set current_phase = least(current_phase, ${phase}), updated_at = now()
     where id = ${runId}::uuid and status = ${runStatus.running}`);
}

/**
 * Prunes finished runs past retention: freezes each one's counts into runs.summary (what
 * `summarize` makes of its tasks and notes, before they go), then deletes its tasks, notes and
 * window commits, a
 * few runs per call so a backlog never holds long locks. The summaries and the deletes commit
 * together: a run is never left without both its tasks and its counts. The runs are taken FOR
 * UPDATE SKIP LOCKED and the summary is written only where none is, so two reapers never prune one
 * run twice.
 */
export async function pruneFinishedRuns(
  db: Db,
  options: {
    retentionDays: number;
    batch?: number;
    summarize(tx: Queryable, run: RunRow): Promise<RunSummary>;
  },
): Promise<number> {
  const batch = options.batch ?? 20;
  return db.transaction(async (tx) => {
    const due = await tx
      .select()
      .from(runs)
      .where(
        sql`${runs.id} in (select id from drover.runs
                       where status in ${runStatusIn(FINISHED_RUN_STATUSES)} and summary is null
                         and finished_at < now() - make_interval(days => ${options.retentionDays})
                       order by finished_at limit ${batch} for update skip locked)`,
      );
    if (due.length === 0) return 0;
    for (const run of due) {
      const summary = await options.summarize(tx, run);
      await tx.execute(sql`
        update drover.runs set summary = ${JSON.stringify(summary)}::jsonb, updated_at = now()
         where id = ${run.id}::uuid and summary is null`);
    }
    const ids = due.map((r) => r.id);
    await tx.execute(sql`delete from drover.tasks where run_id = any(${sql.param(ids)}::uuid[])`);
    await tx.execute(sql`delete from drover.notes where run_id = any(${sql.param(ids)}::uuid[])`);
    // The throughput chart's windows: the frozen summary is what the page shows of a pruned run.
    await tx.execute(sql`delete from drover.window_commits where run_id = any(${sql.param(ids)}::uuid[])`);
    return due.length;
  });
}

/**
 * The runs the reaper advances on each pass: running ones (a barrier to pass, a finish to settle)
 * and stopping ones (stopped once their running tasks end). A pending run is not yet admitted.
 */
export async function runsToAdvance(q: Queryable): Promise<string[]> {
  const rows = await q.execute<{ id: string }>(
    sql`select id from drover.runs where status in ${runStatusIn(["running", "stopping"])}`,
  );
  return rows.map((r) => r.id);
}
