import { createHash } from "node:crypto";
import { type Database, openDatabase } from "@drover/db/connection";
import { PermanentError } from "@drover/provider-sdk";
import { type CopyTuple, copyOut, fieldCount, type SourceColumns, splitTuples } from "./binary-copy.js";
import { type PgTableConfig, quoteIdent, quoteQualified } from "./config.js";
import { ulidFloor } from "./ulid.js";

type Sql = Database["sql"];

/**
 * The source database: a small pool per connection string and process, shared by the tasks of every
 * run that reads it. Pools are keyed by a hash of the string, so the string itself (which may carry
 * a password) is kept only inside postgres.js.
 */
const pools = new Map<string, Database>();
/** Connections per source database and worker process: reads are short keyset pages. */
const SOURCE_POOL_SIZE = 4;

/** Names a source database without its connection string (which may hold a password). */
export function sourceKey(connection: string): string {
  return createHash("sha256").update(connection).digest("hex");
}

export function sourceDatabase(connection: string | undefined): Sql {
  if (!connection)
    throw new PermanentError("the run has no source connection string (source_config.api_token)");
  const key = sourceKey(connection);
  let pool = pools.get(key);
  if (!pool) {
    pool = openDatabase(connection, { max: SOURCE_POOL_SIZE, applicationName: "drover-pg-table-source" });
    pools.set(key, pool);
  }
  return pool.sql;
}

/** Closes every source pool of this process (worker shutdown, tests). */
export async function closePgTableSources(): Promise<void> {
  const open = [...pools.values()];
  pools.clear();
  await Promise.allSettled(open.map((p) => p.close()));
}

/** Where a slot task stands: its bounds (epoch ms) and the key of the last row its committed windows wrote. */
export interface SlotCursor {
  from: number;
  to: number;
  lastId?: string;
  /** Time mode: the last row's timeColumn, as Postgres prints it. */
  lastTime?: string;
}

const TEXT_TYPES = new Set(["text", "character varying", "character"]);

/**
 * Checks, once per process and source table, that the table and every column the run names exist
 * (information_schema), and that a ULID key is text, before any of them is put into SQL.
 */
const checkedSources = new Map<string, Promise<void>>();

export function checkSourceTable(sql: Sql, connection: string, config: PgTableConfig): Promise<void> {
  const key = `${sourceKey(connection)}|${quoteQualified(config.table)}|${config.idColumn}|${config.timeColumn}|${[...config.mapping.values()].join()}`;
  let check = checkedSources.get(key);
  if (!check) {
    check = (async () => {
      const columns = await sql<{ column_name: string; data_type: string }[]>`
        select column_name, data_type from information_schema.columns
         where table_schema = ${config.table.schema} and table_name = ${config.table.name}`;
      const name = `${config.table.schema}.${config.table.name}`;
      if (columns.length === 0)
        throw new PermanentError(`source table ${name} does not exist (or has no columns)`);
      const types = new Map(columns.map((c) => [c.column_name, c.data_type]));
      const wanted = new Set([
        config.idColumn,
        ...(config.timeColumn ? [config.timeColumn] : []),
        ...config.mapping.values(),
      ]);
      const missing = [...wanted].filter((c) => !types.has(c));
      if (missing.length > 0)
        throw new PermanentError(`source table ${name} has no column(s) ${missing.join(", ")}`);
      if (!config.timeColumn && !TEXT_TYPES.has(types.get(config.idColumn)!))
        throw new PermanentError(
          `source column ${config.idColumn} is ${types.get(config.idColumn)}; a ULID key must be text (or give timeColumn)`,
        );
    })();
    checkedSources.set(key, check);
    check.catch(() => checkedSources.delete(key));
  }
  return check;
}

/**
 * A slot's row as the walk reads it: the key and (time mode) the time as text, and, when the rows
 * travel through the worker, the row itself as a binary COPY tuple (binary-copy.ts).
 */
export interface SourceRecord {
  id: string;
  time: string | null;
  tuple: CopyTuple | undefined;
}

/**
 * The slot's WHERE clause, with parameters from $n on. ULID mode: `id >= floor(from) and id < floor(to)`,
 * bounds made from the id's time component, so adjacent slots neither overlap nor leave a gap.
 * Time mode: `time >= from and time < to`.
 */
export function slotPredicate(
  config: PgTableConfig,
  slot: { from: number; to: number },
  firstParam: number,
  columns: { id: string; time: string | undefined },
): { text: string; params: string[] } {
  if (config.timeColumn && columns.time) {
    return {
      text: `${quoteIdent(columns.time)} >= $${firstParam}::timestamptz and ${quoteIdent(columns.time)} < $${firstParam + 1}::timestamptz`,
      params: [new Date(slot.from).toISOString(), new Date(slot.to).toISOString()],
    };
  }
  return {
    text: `${quoteIdent(columns.id)} >= $${firstParam} and ${quoteIdent(columns.id)} < $${firstParam + 1}`,
    params: [ulidFloor(slot.from), ulidFloor(slot.to)],
  };
}

/**
 * A value inside the text of a statement, for COPY, which takes no parameters: an escape string
 * literal (backslash and quote doubled), so it reads the same whatever standard_conforming_strings
 * says, and untyped, so it takes the type of the column it is compared with as a parameter would.
 */
export function literal(value: string): string {
  if (value.includes("\0")) throw new PermanentError("a key or bound holds a NUL character");
  return `E'${value.replace(/\\/g, "\\\\").replace(/'/g, "''")}'`;
}

/**
 * One keyset page of a slot, in key order, after the cursor's last row, read as one binary COPY.
 * `columns` (binary-copy.ts) are the mapped columns to carry; without them (the in-database copy,
 * whose rows never leave the server) the page holds keys and times only.
 */
export async function readPage(
  sql: Sql,
  config: PgTableConfig,
  cursor: SlotCursor,
  limit: number,
  columns: SourceColumns | undefined,
  /**
   * Key mode only (no timeColumn): the page starts at this key (inclusive) instead of right after
   * the cursor's last row, so a re-drive seeks to the next row it wants (redrive.ts).
   */
  startAt?: string,
): Promise<SourceRecord[]> {
  const id = quoteIdent(config.idColumn);
  const time = config.timeColumn ? quoteIdent(config.timeColumn) : undefined;
  const where = slotPredicate(config, cursor, 1, { id: config.idColumn, time: config.timeColumn });
  const params: string[] = [...where.params];
  let after = "";
  if (startAt !== undefined) {
    if (time) throw new PermanentError("a page of a time-ordered slot cannot start at a key");
    params.push(startAt);
    after = ` and ${id} >= $${params.length}`;
  }
  if (cursor.lastId !== undefined) {
    if (time && cursor.lastTime !== undefined) {
      params.push(cursor.lastTime, cursor.lastId);
      after += ` and (${time}, ${id}) > ($${params.length - 1}::timestamptz, $${params.length})`;
    } else {
      params.push(cursor.lastId);
      after += ` and ${id} > $${params.length}`;
    }
  }
  if (!Number.isInteger(limit) || limit < 1) throw new Error(`a page of ${limit} rows`);
  // Output names of their own, so that ORDER BY names the table's columns, never a selected one.
  const selected = columns ? columns.select.map((c, i) => `, ${c} as c${i}`).join("") : "";
  // Identifiers are quoted and checked (config.ts), so a $n here can only be a placeholder.
  const query = `select ${id}::text as k, ${time ? `${time}::text` : "null::text"} as t${selected}
       from ${quoteQualified(config.table)}
      where ${where.text}${after}
      order by ${time ? `${time}, ${id}` : id}
      limit ${limit}`.replace(/\$(\d+)/g, (_, n: string) => literal(params[Number(n) - 1]!));
  const tuples = splitTuples(await copyOut(sql, query), fieldCount(columns));
  return tuples.map((t) => ({ id: t.key, time: t.time, tuple: columns ? t : undefined }));
}
