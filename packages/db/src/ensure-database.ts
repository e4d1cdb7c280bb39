import postgres from "postgres";
import { isDatabaseUnavailable } from "./pg-error.js";

/**
 * Creates the database named in `url` when it does not exist yet, so a first start on a fresh
 * Postgres needs no manual step. Connects to the server's `postgres` database to do it.
 */
export async function ensureDatabase(url: string): Promise<boolean> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ""));
  if (!name) throw new Error(`DATABASE_URL ${url} names no database`);
  const admin = new URL(url);
  admin.pathname = "/postgres";
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    const [exists] = await sql`select 1 from pg_database where datname = ${name}`;
    if (exists) return false;
    try {
      await sql.unsafe(`create database "${name.replace(/"/g, '""')}"`);
    } catch (err) {
      // 42P04: another process created it a moment ago.
      if ((err as { code?: string }).code !== "42P04") throw err;
    }
    return true;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * Resolves once the server of `url` answers a query, waiting (with a backoff up to 2 s) while it is
 * unreachable or restarting: a process that starts during a database restart, or a task that met
 * one, goes on when the server is back instead of exiting or counting it as a failure. Any other
 * error (a wrong password, a refused role) is thrown at once: waiting cannot mend it. `onWait` hears
 * the first failed try and then one every 5 s at most, with how long it has waited so far.
 */
/** How long a starting coordinator or worker waits for its database before it gives up and says why. */
export const DATABASE_START_WAIT_MS = 120_000;

export async function untilDatabaseAnswers(
  url: string,
  options: {
    signal?: AbortSignal;
    onWait?: (err: unknown, waitedMs: number) => void;
    /** Ask this database of the server instead of url's (the server's `postgres`, before url's exists). */
    database?: string;
    /**
     * Give up after this long with an error saying what to check: a server that never answers is
     * more likely a wrong DATABASE_URL than a long restart. No limit when absent.
     */
    timeoutMs?: number;
  } = {},
): Promise<void> {
  const target = new URL(url);
  if (options.database) target.pathname = `/${options.database}`;
  const started = Date.now();
  let said = Number.NEGATIVE_INFINITY;
  for (let delay = 250; ; delay = Math.min(2_000, delay * 2)) {
    const sql = postgres(target.toString(), { max: 1, connect_timeout: 5, onnotice: () => {} });
    try {
      await sql`select 1`;
      return;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      if (options.timeoutMs !== undefined && Date.now() - started >= options.timeoutMs)
        throw new Error(
          `no database server answered at ${target.host} within ${Math.round(options.timeoutMs / 1000)} s (${(err as Error).message}): is DATABASE_URL right, and is the server up?`,
          { cause: err },
        );
      if (Date.now() - said >= 5_000) {
        said = Date.now();
        options.onWait?.(err, said - started);
      }
    } finally {
      await sql.end({ timeout: 1 }).catch(() => {});
    }
    if (options.signal?.aborted) throw options.signal.reason;
    await new Promise((r) => setTimeout(r, delay));
  }
}
