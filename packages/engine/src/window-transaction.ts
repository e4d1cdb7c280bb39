import { type Db, executePrepared, pgErrorCode, type Tx } from "@drover/db";
import { TransientError } from "@drover/provider-sdk";
import {
  type DestinationStall,
  DestinationStallError,
  destinationTimeout,
} from "@drover/provider-sdk/engine";
import { sql } from "drizzle-orm";

/**
 * How long one window's transaction may take before the engine stops waiting for it. A window holds
 * rows already fetched (no network I/O inside a transaction), so its time is the database's alone:
 * statements, lock waits behind other writers, the commit; the window-duration histogram's buckets
 * stop at 30 s. 60 s is twice that, so it fires for a transaction that is not coming back, not for
 * a slow one; and a false fire costs one retried window (only a window too slow on every one of
 * DROVER_MAX_ATTEMPTS attempts fails its task). Against that, a lane stuck for at most a minute,
 * where before it stayed stuck until the ack deadline and the reaper.
 */
export const WINDOW_DEADLINE_MS = 60_000;
/**
 * How long ending an expired transaction may take: pg_terminate_backend waits this long for the
 * backend to exit, and the task's attempt waits no longer for that statement (it needs a pool
 * connection, and a pool whose connections all hang cannot give one).
 */
const END_BACKEND_WAIT_MS = 5_000;

/**
 * How long a window's transaction may sit idle on the server, waiting for its client. Nothing but
 * the worker's own CPU runs between a window's statements, so a backend idle this long belongs to a
 * worker frozen or cut off from the database (a partition: its socket stays open, silent, and the
 * server holds the transaction's row locks until TCP gives up, hours later). The task is handed on
 * once the worker's liveness record expires (10 s by default), and the worker taking it over must
 * not then wait behind those locks for the whole deadline: the server ends such a transaction
 * itself, as soon as a live worker could need its rows.
 */
export const WINDOW_IDLE_MS = 10_000;

/**
 * How long a run waits after the destination refused or held a window (a schema that no longer takes
 * its rows, a lock another session keeps) before trying one again: long enough that a product's
 * migration has time to finish, short enough that a fixed schema costs the run little (an operator's
 * resume brings it forward).
 */
export const DESTINATION_PROBE_MS = 30_000;

/**
 * A window's transaction missed its deadline: it was abandoned (and its backend ended), the task
 * retries. `stall` says what the server saw the window wait for when the deadline fired, when that
 * was another session's lock: the destination's doing, not the client's (see destinationWindow).
 */
export class WindowDeadlineError extends TransientError {
  constructor(deadlineMs: number, options?: { cause?: unknown; stall?: DestinationStall | undefined }) {
    super(`a window's transaction did not settle within ${deadlineMs} ms`, options);
    this.stall = options?.stall;
  }
  readonly stall: DestinationStall | undefined;
}

/** The server-side limits set below; when one fires past the deadline it is the deadline's backstop. */
const OWN_LIMIT_SQLSTATES = new Set([
  "57014", // query_canceled: statement_timeout
  "25P03", // idle_in_transaction_session_timeout
]);

const EXPIRED = Symbol("expired");

/**
 * A window's transaction with a deadline. Seen in the chaos suite (~1 stress run in 10): after
 * pg_terminate_backend, postgres.js can leave a transaction's promise pending forever, and nothing
 * the server does reaches a promise the driver has lost track of. Only a timer on our side frees the
 * task whatever state the driver is in, so the timer decides: past the deadline the window fails
 * with a transient error, the attempt releases the task (cursor intact) and the retry starts again
 * from the checkpoint in the database, not from this attempt's view of it.
 *
 * The transaction is then ended with pg_terminate_backend, matched on its backend pid *and* its
 * start (xact_start = its now()), so a reused pid or a later transaction on that backend is never
 * hit. Of the ways to retire the connection this is the one that acts at once, whether the server is
 * still busy (a lock wait) or idle while the driver waits: the server rolls the transaction back and
 * drops its locks (a row lock or a half-written window would otherwise outlive the attempt and block
 * its retry), and the socket closed from the server's side sends postgres.js down its close path,
 * which fails what the transaction still awaits and opens a fresh connection for the next query
 * instead of handing it the stuck one. SET LOCAL limits cannot free the task (nothing the server
 * does reaches a lost promise) and would cut the transaction only when they fire; they are set anyway,
 * a little past the deadline (the idle one sooner: WINDOW_IDLE_MS), for when the terminate cannot
 * be sent (pool exhausted, database unreachable): they still end the transaction, and with it any
 * wait of the task's release, or of the worker that took the task over, on a row it locked.
 *
 * A COMMIT whose answer never arrived may have committed. That is safe without anything here: rows,
 * ledger slots and the checkpoint commit together or not at all, every write of the attempt is fenced
 * on its claim token, and the ledger refuses a second created/matched slot, so the retry either
 * resumes after the committed window or rewrites a window that rolled back; nothing is lost and
 * nothing is written twice. A transaction the terminate cannot reach is covered the same way: it
 * commits before the task is released and the retry resumes after it, or its checkpoint fails the
 * claim-token fence and it rolls back.
 */
export async function windowTransaction<R>(
  db: Db,
  deadlineMs: number,
  fn: (tx: Tx) => Promise<R>,
  idleMs = WINDOW_IDLE_MS,
): Promise<R> {
  const started = Date.now();
  let backend: { pid: number; xactStart: string } | undefined;
  const limit = `${deadlineMs + END_BACKEND_WAIT_MS}ms`;
  const idleLimit = `${Math.min(deadlineMs + END_BACKEND_WAIT_MS, idleMs)}ms`;
  const work = db.transaction(async (tx) => {
    // Awaited, not pipelined ahead of the window's first statement: pipelined, it saved 3.1 ms a
    // streamed window in the server's log (FINDINGS, 2026-12-07) but no measurable time in the
    // table bench, and the one time it was on main the daily-budget end-to-end test failed twice
    // in CI without the cause being found. The window's limits must hold before it starts.
    const [b] = await executePrepared<{ pid: number; xact_start: string }>(
      tx,
      sql`
      select pg_backend_pid() as pid, now()::text as xact_start,
             set_config('statement_timeout', ${limit}, true),
             set_config('idle_in_transaction_session_timeout', ${idleLimit}, true)`,
    );
    if (b) backend = { pid: b.pid, xactStart: b.xact_start };
    return fn(tx);
  });
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<typeof EXPIRED>((resolve) => {
    timer = setTimeout(resolve, deadlineMs, EXPIRED);
  });
  let settled: R | typeof EXPIRED;
  try {
    settled = await Promise.race([work, expired]);
  } catch (err) {
    const code = pgErrorCode(err);
    // Only when our timer was late (a blocked event loop); a shorter limit of the role's is not ours.
    if (code && OWN_LIMIT_SQLSTATES.has(code) && Date.now() - started >= deadlineMs)
      throw new WindowDeadlineError(deadlineMs, { cause: err });
    throw err;
  } finally {
    clearTimeout(timer);
  }
  if (settled !== EXPIRED) return settled;
  // Whatever the abandoned transaction ends with is nobody's answer any more.
  work.catch(() => {});
  // Hung before its first answer, the transaction has no backend to end; the timer still freed the task.
  const stall = backend ? await lockWaitOf(db, backend, deadlineMs).catch(() => undefined) : undefined;
  if (backend) await endBackend(db, backend).catch(() => {});
  throw new WindowDeadlineError(deadlineMs, { stall });
}

/**
 * A window that writes the destination, under the window's deadline: a wait the destination imposed
 * (another session's lock past the deadline, the server's own lock or statement timeout) becomes a
 * DestinationStallError, which parks the run until `probeMs` from now instead of spending the task's
 * attempts on a lock that a product's migration may hold for minutes. A deadline the client missed
 * by itself (a driver that lost the answer, a backend idle or gone) stays a transient retry.
 */
export async function destinationWindow<R>(
  db: Db,
  limits: { deadlineMs: number; probeMs?: number | undefined },
  fn: (tx: Tx) => Promise<R>,
): Promise<R> {
  try {
    return await windowTransaction(db, limits.deadlineMs, fn);
  } catch (err) {
    const stall = err instanceof WindowDeadlineError ? err.stall : destinationTimeout(err);
    if (!stall) throw err;
    const retryAt = new Date(Date.now() + (limits.probeMs ?? DESTINATION_PROBE_MS));
    throw new DestinationStallError(stall, retryAt, { cause: err });
  }
}

/** Longest a blocker's statement is quoted in a stall's words. */
const BLOCKER_QUERY_CHARS = 120;

/**
 * What the expired transaction's backend waits for, read before it is ended: a lock it has not been
 * granted, on which table (a row lock's wait is on the holder's transaction; the table is the one
 * of the tuple lock it already holds), and who holds it. Undefined when it waits for no lock (busy,
 * or idle while its client lost the answer: not the destination's doing). Bounded like the
 * terminate, since the pool may have nothing to give.
 */
async function lockWaitOf(
  db: Db,
  backend: { pid: number; xactStart: string },
  deadlineMs: number,
): Promise<DestinationStall | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, END_BACKEND_WAIT_MS, undefined);
  });
  try {
    const rows = await Promise.race([
      db.execute<{
        mode: string;
        table: string | null;
        blocker_pid: number | null;
        blocker_query: string | null;
      }>(sql`
        select w.mode,
               coalesce(w.relation, t.relation)::regclass::text as table,
               b.pid as blocker_pid, left(b.query, ${BLOCKER_QUERY_CHARS}) as blocker_query
          from pg_stat_activity a
          join lateral (select mode, relation from pg_locks
                         where pid = a.pid and not granted limit 1) w on true
          left join lateral (select relation from pg_locks
                              where pid = a.pid and locktype = 'tuple' limit 1) t on true
          left join lateral (select pid, query from pg_stat_activity
                              where pid = any(pg_blocking_pids(a.pid)) order by pid limit 1) b on true
         where a.pid = ${backend.pid} and a.xact_start = ${backend.xactStart}::timestamptz`),
      gaveUp,
    ]);
    const w = rows?.[0];
    if (!w) return undefined;
    const holder = w.blocker_pid
      ? ` held by pid ${w.blocker_pid}${w.blocker_query ? ` (${w.blocker_query.replace(/\s+/g, " ").trim()})` : ""}`
      : "";
    return {
      table: w.table ?? undefined,
      message: `waited ${deadlineMs} ms for a ${w.mode}${holder}`,
    };
  } finally {
    clearTimeout(timer);
  }
}

async function endBackend(db: Db, backend: { pid: number; xactStart: string }): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, END_BACKEND_WAIT_MS);
  });
  try {
    await Promise.race([
      db.execute(sql`
        select pg_terminate_backend(pid, ${END_BACKEND_WAIT_MS})
          from pg_stat_activity
         where pid = ${backend.pid} and xact_start = ${backend.xactStart}::timestamptz`),
      gaveUp,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One autocommit statement that moves a task (a checkpoint past rows nothing writes), bounded by the
 * window's deadline like a window's transaction: past it the attempt fails transiently and retries
 * from its last checkpoint. The statement is atomic and fenced on the claim token, so one that still
 * lands later changes a task this attempt no longer holds in no way; there is no half-written window
 * whose locks must be ended, which is why it needs no terminate.
 */
export async function statementWithin<R>(deadlineMs: number, statement: Promise<R>): Promise<R> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<typeof EXPIRED>((resolve) => {
    timer = setTimeout(resolve, deadlineMs, EXPIRED);
  });
  try {
    const settled = await Promise.race([statement, expired]);
    if (settled !== EXPIRED) return settled;
    statement.catch(() => {});
    throw new WindowDeadlineError(deadlineMs);
  } finally {
    clearTimeout(timer);
  }
}
