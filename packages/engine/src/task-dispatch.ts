import { type Db, executePrepared, type Queryable, runStatus, taskStatus } from "@drover/db";
import { type SQL, sql } from "drizzle-orm";

/**
 * Which tasks are published, and when: the dispatch rules, every statement and read of them in one
 * place (task-transitions.ts holds the claim and what ends an attempt). A pending task is published
 * by setting dispatched_at, then its message is sent; it is "in flight" from then until its attempt
 * ends. A dispatch round (the coordinator's dispatcher) reads each running run's demand, deals the
 * pool out as fair shares and marks each run's deficit; a worker whose task ended hands its slot on
 * up to the run's share; a task over its run's share yields its slot between windows.
 */

/** In flight: claimed and running, or published and not yet claimed. `t` names drover.tasks. */
function inFlight(t: string): SQL {
  const task = sql.raw(t);
  return sql`(${task}.status = ${taskStatus.running} or (${task}.status = ${taskStatus.pending} and ${task}.dispatched_at is not null))`;
}

/**
 * May be published now: pending, of its run's current phase, not yet published, and due. `t` names
 * drover.tasks, `run` a row with the run's current_phase.
 */
function dispatchable(t: string, run: string): SQL {
  const task = sql.raw(t);
  return sql`${task}.phase = ${sql.raw(run)}.current_phase and ${task}.status = ${taskStatus.pending}
         and ${task}.dispatched_at is null and ${task}.available_at <= now()`;
}

/**
 * A run that moved (a phase advanced) this recently, or with a task of its current phase due this
 * soon, is present (the coordinator's fair-share.ts): the gap between two phases or two pages of a
 * chain does not give its share away, while a run parked until tomorrow's budget does not hold one.
 */
const PRESENT_WITHIN_S = 5;

/** A running run as a dispatch round weighs it. */
export interface RunDemandRow extends Record<string, unknown> {
  runId: string;
  tenantId: string;
  traceContext: Record<string, string> | null;
  /** Claimed and not ended. */
  running: number;
  /** Published and not yet claimed. */
  queued: number;
  /** Dispatchable tasks, counted up to `readyLimit`. */
  ready: number;
  /** Moved lately or has a task due in a moment (PRESENT_WITHIN_S). */
  present: boolean;
}

/**
 * What every running run (of the slice) has in flight and ready, oldest run first, for a dispatch round. Ready
 * tasks are counted up to `readyLimit` (no run can be given more than the whole pool), so a run
 * with thousands seeded costs no more to weigh than one with a few.
 */
export async function runDemand(
  q: Queryable,
  readyLimit: number,
  slice: DispatchSlice = WHOLE_POOL,
): Promise<RunDemandRow[]> {
  return q.execute<RunDemandRow>(sql`
    select r.id as "runId", r.tenant_id as "tenantId", r.trace_context as "traceContext",
           coalesce(f.running, 0)::int as running, coalesce(f.queued, 0)::int as queued,
           (select count(*)::int from (
              select 1 from drover.tasks t
               where t.run_id = r.id and ${dispatchable("t", "r")}
               limit ${readyLimit}) due) as ready,
           r.updated_at > now() - make_interval(secs => ${PRESENT_WITHIN_S})
             or exists (select 1 from drover.tasks t
                         where t.run_id = r.id and t.status = ${taskStatus.pending} and t.phase = r.current_phase
                           and t.available_at <= now() + make_interval(secs => ${PRESENT_WITHIN_S})) as present
      from drover.runs r
      left join lateral (
        select count(*) filter (where t.status = ${taskStatus.running}) as running,
               count(*) filter (where t.status = ${taskStatus.pending}) as queued
          from drover.tasks t
         where t.run_id = r.id and ${inFlight("t")}) f on true
     where r.status = ${runStatus.running}
       ${slice.count > 1 ? sql`and ${sliceOf("r.tenant_id", slice.count)} = ${slice.index}` : sql``}
     order by r.created_at`);
}

/**
 * Marks a run's deficit of tasks as published: up to `maxInflight` in flight (running, or published
 * and not yet claimed), taken from the run's current phase, due ones only, oldest first. Fenced on
 * the run being 'running'. SKIP LOCKED lets two coordinators top up the same run at once without
 * both marking (and publishing) the same task. Returns what the caller must now publish, with the
 * run's trace context.
 */
export async function markTasksDispatched(
  q: Queryable,
  runId: string,
  maxInflight: number,
): Promise<{ ids: number[]; traceContext: Record<string, string> | null }> {
  // Prepared: a worker's hand-on runs it for every task that ends.
  const picked = await executePrepared<{ id: string; trace_context: Record<string, string> | null }>(
    q,
    sql`
    with run as (
      select r.id, r.current_phase, r.trace_context from drover.runs r where r.id = ${runId}::uuid and r.status = ${runStatus.running}
    ), inflight as (
      select count(*)::int as n from drover.tasks t
       where t.run_id = ${runId}::uuid and ${inFlight("t")}
    ), due as (
      select t.id from drover.tasks t, run
       where t.run_id = run.id and ${dispatchable("t", "run")}
       order by t.id
       limit greatest(${maxInflight} - (select n from inflight), 0)
       for update of t skip locked
    )
    update drover.tasks t set dispatched_at = now()
      from due, run
     where t.id = due.id
    returning t.id, run.trace_context`,
  );
  return { ids: picked.map((r) => Number(r.id)), traceContext: picked[0]?.trace_context ?? null };
}

/**
 * A dispatch round's marking, set-based: each run's deficit up to its target (as
 * markTasksDispatched, for many runs in two statements rather than two a run, which made a round
 * over a thousand live runs take seconds). First every run's dispatch lock, in one order (a worker
 * handing on a slot holds one of them, never two, so the order only keeps two rounds that ever
 * overlap from deadlocking); then, on a snapshot taken after the locks, each run's in-flight count
 * and its due tasks, oldest first, SKIP LOCKED as in markTasksDispatched. Returns each run's
 * marked ids, oldest first.
 */
export async function markRunDeficits(
  q: Queryable,
  targets: readonly { runId: string; target: number }[],
): Promise<Map<string, number[]>> {
  const marked = new Map<string, number[]>();
  if (targets.length === 0) return marked;
  const ids = targets.map((t) => t.runId);
  await q.execute(sql`
    select count(pg_advisory_xact_lock(hashtext('drover.dispatch.run'), hashtext(u.id)))
      from (select id from unnest(${sql.param(ids)}::text[]) as u(id) order by id) u`);
  const rows = await q.execute<{ id: string; run_id: string }>(sql`
    with want as (
      select w.run_id, w.target from unnest(${sql.param(ids)}::uuid[], ${sql.param(targets.map((t) => t.target))}::int[]) as w(run_id, target)
    ), run as (
      select r.id, r.current_phase, want.target from drover.runs r join want on want.run_id = r.id
       where r.status = ${runStatus.running}
    ), due as (
      select d.id from run cross join lateral (
        select t.id from drover.tasks t
         where t.run_id = run.id and ${dispatchable("t", "run")}
         order by t.id
         limit greatest(run.target - (select count(*)::int from drover.tasks f where f.run_id = run.id and ${inFlight("f")}), 0)
         for update of t skip locked) d
    )
    update drover.tasks t set dispatched_at = now()
      from due where t.id = due.id
    returning t.id, t.run_id`);
  for (const r of rows.toSorted((a, b) => Number(a.id) - Number(b.id))) {
    const list = marked.get(r.run_id) ?? [];
    list.push(Number(r.id));
    marked.set(r.run_id, list);
  }
  return marked;
}

/**
 * A part of the live runs that dispatch rounds serve on their own: the runs whose tenant id hashes
 * to `index` of `count` (hashtext, so every coordinator computes the same). A tenant's runs are all
 * in one slice, so its in-flight cap is still decided in one round. Rounds of different slices run
 * at once (on one coordinator or several), each reading only its slice's runs; with one slice a
 * round serves every run, as before slices existed.
 */
export interface DispatchSlice {
  index: number;
  count: number;
}

export const WHOLE_POOL: DispatchSlice = { index: 0, count: 1 };

/** The slice index of the tenant id in column `col` (SQL). */
function sliceOf(col: string, count: number): SQL {
  return sql`mod(hashtext(${sql.raw(col)})::bigint + 2147483648, ${count})`;
}

/** The slice the run's tenant falls in (undefined for a run that does not exist). */
export async function runSlice(q: Queryable, runId: string, count: number): Promise<number | undefined> {
  if (count <= 1) return 0;
  const [row] = await q.execute<{ slice: number }>(
    sql`select ${sliceOf("tenant_id", count)}::int as slice from drover.runs where id = ${runId}::uuid`,
  );
  return row?.slice;
}

/**
 * Serializes the dispatch rounds of one slice across coordinators: two rounds computing shares from
 * the same counts would both fill the same deficits. Taken inside the round's transaction. The
 * whole pool keeps the one lock it always had, so coordinators of an older release still exclude
 * a round of a newer one.
 */
export function dispatchLock(slice: DispatchSlice) {
  if (slice.count <= 1) return sql`select pg_advisory_xact_lock(hashtext('drover.dispatch'))`;
  return sql`select pg_advisory_xact_lock(hashtext('drover.dispatch'), ${slice.index}::int)`;
}

/**
 * The lane slots a slice's round may deal out: whatever the other slices' runs do not hold, each of
 * them holding the larger of its tasks in flight and the share its own slice's last round dealt it
 * (a run no round has dealt yet, an equal part of the pool), so the slices' rounds, one after
 * another, deal the pool out as one round would and a run alone gets an idle pool. Never less than
 * the slice's part of the pool by its count of running runs (rounded up): a new run gets its share
 * at once, as within one round, and the runs above theirs give slots back between windows
 * (overFairShare). The in-flight counts read the tasks_in_flight index: a few hundred rows,
 * whatever the runs' backlogs.
 */
export async function slicePool(q: Queryable, slice: DispatchSlice, slots: number): Promise<number> {
  if (slice.count <= 1) return slots;
  const [row] = await q.execute<{ mine: number; all: number; elsewhere: number }>(sql`
    with live as (
      select r.id, r.fair_share, ${sliceOf("r.tenant_id", slice.count)} = ${slice.index} as mine
        from drover.runs r where r.status = ${runStatus.running}
    ), flight as (
      select t.run_id, count(*)::int as n from drover.tasks t join live on live.id = t.run_id
       where ${inFlight("t")} group by t.run_id
    )
    select count(*) filter (where live.mine)::int as mine, count(*)::int as all,
           coalesce(sum(greatest(coalesce(live.fair_share::float8, ${slots}::float8 / (select count(*) from live)),
                                 coalesce(flight.n, 0))) filter (where not live.mine), 0)::float8 as elsewhere
      from live left join flight on flight.run_id = live.id`);
  if (!row || row.mine === 0) return 0;
  return Math.max(Math.ceil((slots * row.mine) / row.all), Math.floor(slots - row.elsewhere));
}

/**
 * Serializes the statements that publish one run's tasks (a round marking the run's deficit, a
 * worker handing its slot on): two counting the same in-flight tasks would both fill the same
 * deficit. Per run, so a worker handing on a slot waits only for a round that is marking its run.
 */
export function runDispatchLock(runId: string) {
  return sql`select pg_advisory_xact_lock(hashtext('drover.dispatch.run'), hashtext(${runId}))`;
}

/**
 * Records each run's fair share as a dispatch round dealt it out (runs.fair_share), and the
 * ceiling above which its tasks yield unprompted while shares are reserved (runs.share_ceiling,
 * null while they are lent). Only the runs whose share changed are written: a round over a
 * thousand live runs rewrote every one of their rows before, most of them to the same values.
 */
export async function recordFairShares(
  q: Queryable,
  shares: ReadonlyMap<string, number>,
  ceiling: number | null = null,
): Promise<void> {
  if (shares.size === 0) return;
  await q.execute(sql`
    update drover.runs r set fair_share = s.share, share_ceiling = ${ceiling}::int
      from unnest(${sql.param([...shares.keys()])}::uuid[], ${sql.param([...shares.values()])}::int[]) as s(id, share)
     where r.id = s.id and r.status = ${runStatus.running}
       and (r.fair_share is distinct from s.share or r.share_ceiling is distinct from ${ceiling}::int)`);
}

/**
 * A task of the run ended and freed a lane slot: marks the run's next due tasks as published, up to
 * the fair share the last dispatch round gave the run (none before the first round). The worker
 * that freed the slot publishes them at once, so a chain's next page takes the slot its page just
 * left instead of waiting for the coordinator's round, while the run never holds more than its
 * share: a share that shrank (another run arrived) is given back as the run's tasks end. Fenced on
 * the run being 'running' (markTasksDispatched); serialized with rounds marking the run by
 * runDispatchLock.
 */
export async function handOnSlot(db: Db, runId: string): Promise<HandedOn> {
  return db.transaction(async (tx) => {
    await tx.execute(runDispatchLock(runId));
    return handOnLockedSlot(tx, runId);
  });
}

/** Tasks marked published by a hand-on, for the caller to publish, with the run's trace context. */
export interface HandedOn {
  ids: number[];
  traceContext: Record<string, string> | null;
}

/**
 * handOnSlot's marking, in a transaction that already holds the run's runDispatchLock: the task
 * runner's finish of a succeeded task hands its slot on in the commit that frees it (one commit a
 * task less, and no moment between the two). Such a finish takes the run's lock before it updates
 * its task row, as yieldSlot does, and the rounds and other hand-ons under the lock touch only
 * pending rows (SKIP LOCKED): none waits for a lock another holds while waiting for one of its.
 */
export async function handOnLockedSlot(tx: Queryable, runId: string): Promise<HandedOn> {
  const [run] = await executePrepared<{ fair_share: number | null }>(
    tx,
    sql`select fair_share from drover.runs where id = ${runId}::uuid and status = ${runStatus.running}`,
  );
  if (!run?.fair_share) return { ids: [], traceContext: null };
  return markTasksDispatched(tx, runId, run.fair_share);
}

/**
 * Whether a running task of the run should give its lane slot up now: the run holds more running
 * tasks than the share the last dispatch round gave it (another run arrived, the pool shrank), and
 * a task of another running run is published and waiting to be claimed, a run that would still
 * hold fewer running tasks than this one after the handover. Tasks that go through a whole list in
 * one attempt run for minutes, and nothing running is taken back otherwise, so without this a
 * newcomer's task would wait for the first of them to end. The second condition keeps an uneven
 * split still: rounds hand its odd slot to the runs served least, in turn, and runs a slot apart
 * must not trade it back and forth, each time fetching a page again. Read-only: the task runner
 * asks it between windows and only then tries yieldSlot, which decides under the run's lock.
 * Running tasks of a worker whose liveness record expired are not counted: they hold no slot.
 * While the pool reserves shares (the workers are busy), a run above the share ceiling the last
 * round recorded yields without anyone waiting: the slot stays free for a present run, and a busy
 * worker's CPU goes to the runs within their shares.
 */
export async function overFairShare(q: Queryable, runId: string): Promise<boolean> {
  const [row] = await q.execute<{ over: boolean }>(sql`
    with me as (
      select r.id, r.fair_share, r.share_ceiling,
             (select count(*) from drover.tasks t
               where t.run_id = r.id and t.status = ${taskStatus.running}
                 and (t.worker is null or exists (select 1 from drover.workers w
                                                   where w.id = t.worker and w.expires_at > now()))) as running
        from drover.runs r where r.id = ${runId}::uuid and r.status = ${runStatus.running})
    select (me.fair_share is not null and me.running > me.fair_share
            and (me.running > coalesce(me.share_ceiling, me.running) or exists (
              select 1 from drover.runs o
               where o.status = ${runStatus.running} and o.id <> me.id
                 and exists (select 1 from drover.tasks ot
                              where ot.run_id = o.id and ot.status = ${taskStatus.pending}
                                and ot.dispatched_at is not null and ot.available_at <= now())
                 and (select count(*) from drover.tasks x where x.run_id = o.id and x.status = ${taskStatus.running}) + 1
                     < me.running))) as over
      from me`);
  return row?.over === true;
}

/**
 * The task gives its lane slot up between windows because its run is over its fair share and
 * another run is waiting (overFairShare): back to pending, cursor and committed windows intact, the
 * attempt not counted, and unpublished (dispatched_at cleared; the worker acks its message), so the
 * run publishes it again when its share allows. Fenced on the claim, and decided again under the
 * run's dispatch lock so that of several tasks asking at once only the run's excess over its share
 * yields, never more: the run keeps its share.
 */
export async function yieldSlot(db: Db, runId: string, taskId: number, claimToken: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    await tx.execute(runDispatchLock(runId));
    if (!(await overFairShare(tx, runId))) return false;
    const rows = await tx.execute(sql`
      update drover.tasks
         set status = ${taskStatus.pending}, attempts = greatest(attempts - 1, 0),
           attempts_since_progress = greatest(attempts_since_progress - 1, 0), locked_by = null, locked_at = null,
             worker = null, dispatched_at = null, available_at = now(), updated_at = now()
       where id = ${taskId} and status = ${taskStatus.running} and locked_by = ${claimToken}
      returning id`);
    return rows.length === 1;
  });
}

/**
 * Unmarks pending tasks whose message was never published or arrived before the task was due, so
 * the next top-up publishes them again. Fenced on 'pending': a task claimed meanwhile is left alone.
 */
export async function undispatchTasks(q: Queryable, taskIds: readonly number[]): Promise<number> {
  if (taskIds.length === 0) return 0;
  const rows = await q.execute(sql`
    update drover.tasks set dispatched_at = null
     where id = any(${sql.param(taskIds)}::bigint[]) and status = ${taskStatus.pending}
    returning id`);
  return rows.length;
}

/**
 * Tasks published `afterMs` ago and still pending were lost by the broker (it is only a doorbell):
 * unmarked, the next top-up publishes them again. A duplicate is harmless, the claim being fenced.
 */
export async function redispatchLostTasks(q: Queryable, afterMs: number): Promise<number> {
  const rows = await q.execute(sql`
    update drover.tasks set dispatched_at = null
     where status = ${taskStatus.pending} and dispatched_at < now() - make_interval(secs => ${afterMs / 1000})
    returning id`);
  return rows.length;
}
