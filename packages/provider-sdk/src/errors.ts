import { isConnectionError, pgErrorCode } from "@drover/db";

/**
 * The one error taxonomy. Whether a failure is worth retrying is decided where it is thrown and
 * carried on the error; the worker maps it once to a task outcome, the coordinator once to a gRPC code.
 *
 * - transient: the same call may work later (network, timeout, 5xx, deadlock, serialization,
 *   lost connection). The task is released with its cursor intact and retried with backoff.
 * - rate_limited: the source said "not before X" (429, daily allowance gone). The task is parked
 *   until X without spending an attempt.
 * - permanent: retrying cannot help (4xx, bad configuration). The task fails with the reason.
 * - row: one source row cannot be written. It is noted and loses only itself.
 */
export type ErrorClass = "transient" | "rate_limited" | "permanent" | "row";

export abstract class DroverError extends Error {
  abstract readonly class: ErrorClass;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class TransientError extends DroverError {
  readonly class = "transient" as const;
  /**
   * Set where a source call failed in a way the same request may well get past a moment later
   * (a 5xx, a dropped connection, a garbled body): see `repeatsInPlace`.
   */
  readonly repeatable: boolean;
  constructor(message: string, options?: { cause?: unknown; repeatable?: boolean }) {
    super(message, options);
    this.repeatable = options?.repeatable ?? false;
  }
}

export class RateLimitedError extends DroverError {
  readonly class = "rate_limited" as const;
  /**
   * Whose wall it is: the source account's (a 429, a spent day: every run on it waits), or only
   * this run's (it has spent its daily share; the others on the account go on).
   */
  readonly scope: "account" | "run";
  constructor(
    message: string,
    /** Not before this instant. */
    readonly retryAt: Date,
    options?: { cause?: unknown; scope?: "account" | "run" },
  ) {
    super(message, options);
    this.scope = options?.scope ?? "account";
  }
}

export class PermanentError extends DroverError {
  readonly class = "permanent" as const;
}

export class RowError extends DroverError {
  readonly class = "row" as const;
}

/**
 * Whether an idempotent source request that failed with `err` is repeated at once by the source
 * client, within the task's attempt, instead of the task giving its attempt back (and, for a mail
 * task, listing its deals again: with 2 % 5xx, 21 % longer imports and ~500 more requests). Only a
 * transient failure marked repeatable where it was thrown: a 5xx or 408, a connection that dropped,
 * a body cut short or garbled. Not a timeout (the call already spent its whole time; the task's
 * own backoff is kinder to a source that slow), not the task's own abort, never a rate limit (the
 * task parks until the reset without spending an attempt), a permanent or a row error.
 */
export function repeatsInPlace(err: unknown): boolean {
  return err instanceof TransientError && err.repeatable;
}

/** SQLSTATEs after which the transaction is gone: no savepoint can contain them, the task retries. */
const TRANSIENT_SQLSTATES = new Set([
  "40001", // serialization_failure
  "40P01", // deadlock_detected
  "55P03", // lock_not_available
  "57P01", // admin_shutdown (pg_terminate_backend)
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "53300", // too_many_connections
  "08000",
  "08003",
  "08006",
  "25P02", // in_failed_sql_transaction: the connection died mid-transaction
  // An operator's pg_cancel_backend or a statement_timeout: the statement, not the data, was stopped.
  "57014", // query_canceled
  "25P03", // idle_in_transaction_session_timeout
  // The server ran short, not the row: the same window may well fit once space or memory is back.
  "53100", // disk_full
  "53200", // out_of_memory
]);

/**
 * SQLSTATE classes that describe the data of one row (constraint, bad value): a savepoint contains them.
 * 22 = data exception, 23 = integrity constraint violation.
 */
function isRowSqlstate(code: string): boolean {
  return code.startsWith("22") || code.startsWith("23");
}

export function classifyError(err: unknown): ErrorClass {
  if (err instanceof DroverError) return err.class;
  if (isConnectionError(err)) return "transient";
  const code = pgErrorCode(err);
  if (code) {
    if (TRANSIENT_SQLSTATES.has(code)) return "transient";
    if (isRowSqlstate(code)) return "row";
    return "permanent";
  }
  if (err instanceof Error) {
    // fetch() reports network failures as TypeError("fetch failed") with a system error as cause.
    if (err.name === "AbortError" || err.name === "TimeoutError") return "transient";
    if (err.name === "TypeError" && /fetch failed/i.test(err.message)) return "transient";
    const sys = (err as { code?: unknown }).code ?? (err.cause as { code?: unknown } | undefined)?.code;
    if (typeof sys === "string" && /^E[A-Z]+/.test(sys)) return "transient";
  }
  return "permanent";
}

/** A short, human reason for notes and task errors; never a stack. */
export function describeError(err: unknown): string {
  const code = pgErrorCode(err);
  let current: unknown = err;
  // Prefer the driver's message over drizzle's "Failed query: <sql>" wrapper.
  while (code && current && typeof current === "object" && (current as { code?: unknown }).code !== code) {
    current = (current as { cause?: unknown }).cause;
  }
  const message =
    current instanceof Error ? current.message : err instanceof Error ? err.message : String(err);
  const text = code ? `${message} (SQLSTATE ${code})` : message;
  return text.length > 500 ? `${text.slice(0, 497)}...` : text;
}
