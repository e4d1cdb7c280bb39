/**
 * drizzle wraps driver errors (DrizzleQueryError) without the SQLSTATE; the postgres.js
 * PostgresError that carries it sits somewhere down the `cause` chain.
 */
export function pgErrorCode(err: unknown): string | undefined {
  let current: unknown = err;
  for (let depth = 0; depth < 8 && current && typeof current === "object"; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The postgres.js connection-level error codes (not SQLSTATEs) that mean the socket went away. */
const CONNECTION_ERRORS = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
]);

export function isConnectionError(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 8 && current && typeof current === "object"; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && CONNECTION_ERRORS.has(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * SQLSTATEs of a server that is going away or not back yet: admin_shutdown (a fast shutdown, or
 * pg_terminate_backend), crash_shutdown, cannot_connect_now (starting up, replaying its WAL), and
 * class 08 (connection exceptions).
 */
const SERVER_AWAY_SQLSTATES = new Set(["57P01", "57P02", "57P03"]);

/**
 * The database server cannot be reached or is restarting: the failure is the server's absence,
 * not the statement's. Callers wait for it to answer again rather than count it against the work.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (isConnectionError(err)) return true;
  const code = pgErrorCode(err);
  return code !== undefined && (SERVER_AWAY_SQLSTATES.has(code) || code.startsWith("08"));
}
