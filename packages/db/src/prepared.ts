import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { driverOf, type Queryable } from "./client.js";

const dialect = new PgDialect();

/**
 * Runs a statement as a named prepared statement of its connection, kept by postgres.js for the
 * connection's life and reused whenever the same text comes again. For the statements a window
 * runs every time (its checkpoint, its upsert, its transaction's limits): drizzle sends every
 * parameterized statement unnamed, and postgres.js must then ask the server for the parameters'
 * types before it can bind them, two round trips where a prepared one needs one. On two cores
 * under a copy each trip waits its turn for the CPU (3–40 ms between a window's statements was
 * measured), so the trips a window does not make are time it keeps.
 *
 * Only for statements whose text is fixed per call site (values always as parameters): every
 * distinct text stays prepared on its connection until the connection closes.
 */
export async function executePrepared<T extends Record<string, unknown>>(
  q: Queryable,
  query: SQL,
): Promise<T[]> {
  const { sql: text, params } = dialect.sqlToQuery(query);
  return (await driverOf(q).unsafe(text, params as never[], { prepare: true })) as unknown as T[];
}
