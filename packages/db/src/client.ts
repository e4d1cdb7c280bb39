import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema/index.js";

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction handle; also what a savepoint (nested transaction) hands out. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
/** Anything that can run a query: the pool or a transaction. */
export type Queryable = Db | Tx;

/**
 * The postgres.js handle a drizzle pool, transaction or savepoint runs its statements on, for what
 * drizzle does not wrap: COPY streams (`.writable()`, `.readable()`). Inside a transaction it is that
 * transaction's own connection, so a COPY commits or rolls back with the rest of it.
 */
export function driverOf(q: Queryable): postgres.Sql {
  const client = (q as unknown as { session?: { client?: postgres.Sql } }).session?.client;
  if (!client) throw new Error("driverOf: not a drizzle postgres.js database or transaction");
  return client;
}

export interface Database {
  db: Db;
  sql: postgres.Sql;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Pool size. A worker needs one per lane slot plus a few for heartbeats and reads. */
  max?: number;
  applicationName?: string;
  /** Sees every statement sent (tests record transaction boundaries with it). */
  debug?: (query: string) => void;
  /**
   * How long a session of this pool may wait on a client gone silent before Postgres ends it: idle
   * in a transaction (idle_in_transaction_session_timeout), or with data sent that the client never
   * acknowledged (tcp_user_timeout: a backend writing a result to a host cut off from the network
   * stays "active", blocked in the send, and no idle limit reaches it). The server notices neither
   * by itself for hours (kernel keepalive and retransmission defaults), and meanwhile the session
   * keeps its locks (the dispatch lock, claimed task rows, a run's row), stalling every other process
   * that needs them. Only for Drover's own database, whose transactions are short between
   * statements (a window sets its own idle limit) and whose results clients read at once; never for
   * a source's.
   */
  silentClientMs?: number;
}

export function openDatabase(url: string, options: DatabaseOptions = {}): Database {
  const sql = postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    connection: {
      application_name: options.applicationName ?? "drover",
      ...(options.silentClientMs
        ? {
            idle_in_transaction_session_timeout: options.silentClientMs,
            tcp_user_timeout: options.silentClientMs,
          }
        : {}),
    },
    // A dead connection must surface as an error the task can retry, not hang a window forever.
    idle_timeout: 30,
    connect_timeout: 10,
    ...(options.debug ? { debug: (_connection: number, query: string) => options.debug!(query) } : {}),
  });
  const db = drizzle(sql, { schema });
  let closing: Promise<void> | undefined;
  return {
    db,
    sql,
    close: () => {
      closing ??= sql.end({ timeout: 5 });
      return closing;
    },
  };
}
