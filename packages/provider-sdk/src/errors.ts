import { isConnectionError, pgErrorCode } from "@drover/db/connection";

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

/**
 * The destination's schema no longer takes what the writer writes: a column it writes or its table
 * is gone (renamed, dropped), or the table gained a NOT NULL column without a default that the
 * statement does not set. Every row would fail the same way, so no row is failed for it: the run's
 * tasks park until `retryAt` without spending an attempt, the run says why once (`describe`), and
 * the parked task's next attempt is the probe: its first window that commits resumes the run by
 * itself once the product's schema is right again.
 * It is a wall like a rate limit's, the run's own: the destination, not the source, says "not yet".
 */
export class DestinationSchemaError extends RateLimitedError {
  constructor(
    readonly fault: DestinationSchemaFault,
    retryAt: Date,
    options?: { cause?: unknown },
  ) {
    super(describeSchemaFault(fault), retryAt, { ...options, scope: "run" });
  }
}

/**
 * The destination kept a window waiting past a limit: another session holds a lock the window needs
 * (a product's migration rewriting its table, a long report holding rows), or the server cut the
 * statement at a statement or lock timeout its operators set. Retrying at once would queue behind
 * the same lock, and spending attempts on it fails a days-long run for a deploy of the product; so it
 * parks like a schema fault (the run's own wall, said once, probed again after the probe interval).
 */
export class DestinationStallError extends RateLimitedError {
  constructor(
    readonly stall: DestinationStall,
    retryAt: Date,
    options?: { cause?: unknown },
  ) {
    super(describeStall(stall), retryAt, { ...options, scope: "run" });
  }
}

export interface DestinationStall {
  /** The server's, when it cut the statement itself (55P03, 57014); none when the window's own deadline fired. */
  sqlstate?: string | undefined;
  table?: string | undefined;
  /** What the window waited for, in a few words: "a RowExclusiveLock lock held by pid 42 (ALTER TABLE …)". */
  message: string;
}

/** One line naming the table, what held the window and the SQLSTATE, and what happens next. */
export function describeStall(s: DestinationStall): string {
  const where = s.table ? `table ${s.table}: ` : "";
  const state = s.sqlstate ? `, SQLSTATE ${s.sqlstate}` : "";
  return `the destination held a window past its limit (${where}${s.message}${state}); no row is failed for it: the run waits and tries again until a window commits`;
}

/**
 * A window's failure that is the server's own limit on a wait, or undefined: a lock timeout
 * (55P03), or a statement timeout (57014 with the server's "statement timeout" words; the same code
 * from an operator's pg_cancel_backend says "user request" and stays a transient retry).
 */
export function destinationTimeout(err: unknown): DestinationStall | undefined {
  const code = pgErrorCode(err);
  if (code !== "55P03" && code !== "57014") return undefined;
  const pg = pgFields(err);
  if (code === "57014" && !/statement timeout/i.test(pg.message)) return undefined;
  return { sqlstate: code, table: pg.table ?? relationIn(pg.where), message: pg.message };
}

/** The relation a lock wait's context names ("while updating tuple (0,1) in relation \"companies\""). */
function relationIn(where: string | undefined): string | undefined {
  return where?.match(/in relation "([^"]+)"/)?.[1];
}

export interface DestinationSchemaFault {
  sqlstate: string;
  /** As the server names it (schema-qualified when it says the schema); undefined when it does not say. */
  table?: string | undefined;
  column?: string | undefined;
  /** The server's own words. */
  message: string;
}

/** One line naming the table, the column and the SQLSTATE, and what to do. */
export function describeSchemaFault(f: DestinationSchemaFault): string {
  const where = [f.table && `table ${f.table}`, f.column && `column ${f.column}`].filter(Boolean).join(", ");
  return `the destination's schema does not take the rows (${where ? `${where}: ` : ""}${f.message}, SQLSTATE ${f.sqlstate}); no row is failed for it: the run waits and tries again until a write succeeds`;
}

/**
 * SQLSTATEs that say the statement no longer fits the table, whatever the row: undefined_table
 * (renamed or dropped) and undefined_column (a column the writer writes was renamed or dropped).
 */
const SCHEMA_SQLSTATES = new Set(["42P01", "42703"]);

/**
 * A write's failure that is the destination's schema's fault rather than the row's, or undefined.
 * A NOT NULL violation (23502) is usually a row's (a required value missing in the source), but not
 * when the statement never names the column: then the table gained a NOT NULL column without a
 * default, and every row fails alike. The statement's text travels on the driver's error.
 */
export function destinationSchemaFault(err: unknown): DestinationSchemaFault | undefined {
  const code = pgErrorCode(err);
  if (!code) return undefined;
  const pg = pgFields(err);
  if (SCHEMA_SQLSTATES.has(code)) return { sqlstate: code, ...pg };
  if (code !== "23502" || !pg.column || pg.query === undefined) return undefined;
  const named =
    pg.query.includes(`"${pg.column}"`) || new RegExp(`\\b${escapeRegExp(pg.column)}\\b`).test(pg.query);
  return named ? undefined : { sqlstate: code, table: pg.table, column: pg.column, message: pg.message };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The server's error fields on the driver's error, wherever drizzle wrapped it. */
function pgFields(err: unknown): {
  table?: string;
  column?: string;
  message: string;
  query?: string;
  where?: string;
} {
  let current: unknown = err;
  for (let depth = 0; depth < 8 && current && typeof current === "object"; depth++) {
    const e = current as {
      code?: unknown;
      message?: unknown;
      schema_name?: unknown;
      table_name?: unknown;
      column_name?: unknown;
      query?: unknown;
      where?: unknown;
    };
    if (typeof e.code === "string" && /^[0-9A-Z]{5}$/.test(e.code)) {
      const table =
        typeof e.table_name === "string"
          ? typeof e.schema_name === "string"
            ? `${e.schema_name}.${e.table_name}`
            : e.table_name
          : undefined;
      return {
        ...(table ? { table } : {}),
        ...(typeof e.column_name === "string" ? { column: e.column_name } : {}),
        message: typeof e.message === "string" ? e.message : String(e.code),
        ...(typeof e.query === "string" ? { query: e.query } : {}),
        ...(typeof e.where === "string" ? { where: e.where } : {}),
      };
    }
    current = (current as { cause?: unknown }).cause;
  }
  return { message: "unknown" };
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
  // Its own words already name the table, the column and the SQLSTATE, and say what happens next.
  if (err instanceof DestinationSchemaError || err instanceof DestinationStallError) return err.message;
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
