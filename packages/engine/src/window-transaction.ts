import { type Db, pgErrorCode, type Tx } from "@drover/db";
import { TransientError } from "@drover/provider-sdk";
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

/** A window's transaction missed its deadline: it was abandoned (and its backend ended), the task retries. */
export class WindowDeadlineError extends TransientError {
  constructor(deadlineMs: number, options?: { cause?: unknown }) {
    super(`a window's transaction did not settle within ${deadlineMs} ms`, options);
  }
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
 * a little past the deadline, for when the terminate cannot be sent (pool exhausted, database
 * unreachable): they still end the transaction, and with it any wait of the task's release on a row
 * it locked.
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
): Promise<R> {
  const started = Date.now();
  let backend: { pid: number; xactStart: string } | undefined;
  const limit = `${deadlineMs + END_BACKEND_WAIT_MS}ms`;
  const work = db.transaction(async (tx) => {
    const [b] = await tx.execute<{ pid: number; xact_start: string }>(sql`
      select pg_backend_pid() as pid, now()::text as xact_start,
             set_config('statement_timeout', ${limit}, true),
             set_config('idle_in_transaction_session_timeout', ${limit}, true)`);
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
  if (backend) await endBackend(db, backend).catch(() => {});
  throw new WindowDeadlineError(deadlineMs);
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
