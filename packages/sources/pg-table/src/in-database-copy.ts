import { randomInt } from "node:crypto";
import { type Database, executePrepared, pgErrorCode, type Queryable } from "@drover/db/connection";
import { PermanentError, type RowResult } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { type PgTableConfig, quoteIdent, quoteQualified } from "./config.js";
import { type DestinationShape, upsertReturning, upsertWindowCounted } from "./destination-table.js";
import { sourceKey } from "./source-table.js";

type Sql = Database["sql"];

/**
 * In-database copy: when the source table lives in the product database itself (another schema,
 * `inDatabaseCopy=auto`), a window is copied by the server, `INSERT … SELECT` by the window's keys,
 * and its rows never travel through the worker. Everything else stays as it is: the worker still
 * walks the slot by keyset (reading keys only), commits each window with its checkpoint, and falls
 * back to a savepoint per row when a window fails. What it saves is the text round trip of every
 * value (out of the source, through postgres.js twice, parsed back into the destination's type),
 * which is most of the cost of copying a JSON payload.
 */

/**
 * Whether the source connection reaches the very database the window transaction runs in, and may
 * be read from it. Settled once per process and source table (a promise, so concurrent first
 * windows ask once).
 */
const verdicts = new Map<string, Promise<boolean>>();
const settled = new Map<string, boolean>();

const verdictKey = (connection: string, config: PgTableConfig) =>
  `${sourceKey(connection)}|${quoteQualified(config.table)}`;

/** The verdict if this process already has it, so a task's very first page can read keys only. */
export function settledSharing(connection: string, config: PgTableConfig): boolean | undefined {
  return settled.get(verdictKey(connection, config));
}

export function sharesDatabase(
  tx: Queryable,
  source: Sql,
  connection: string,
  config: PgTableConfig,
): Promise<boolean> {
  const key = verdictKey(connection, config);
  let verdict = verdicts.get(key);
  if (!verdict) {
    verdict = probe(tx, source, config);
    verdicts.set(key, verdict);
    verdict.then(
      (same) => settled.set(key, same),
      () => verdicts.delete(key),
    );
  }
  return verdict;
}

/**
 * Names, host names and ports prove nothing (a proxy, a replica, two servers both on localhost), so
 * the probe asks the server: the window transaction takes an advisory lock on a random key, and the
 * source connection looks for exactly that lock, held in its own database, in pg_locks (which every
 * role may read, cluster-wide). Only the same database of the same server can see it. The lock is
 * transaction-scoped, so it goes with the window's commit or rollback whatever happens here. The
 * role the worker writes with must also be allowed to read the table, or the copy stays client-side.
 */
async function probe(tx: Queryable, source: Sql, config: PgTableConfig): Promise<boolean> {
  const [k1, k2] = [randomInt(-(2 ** 31), 2 ** 31), randomInt(-(2 ** 31), 2 ** 31)];
  const [held] = await tx.execute<{ locked: boolean; readable: boolean }>(sql`
    select pg_try_advisory_xact_lock(${k1}::int, ${k2}::int) as locked,
           coalesce(has_table_privilege(to_regclass(${quoteQualified(config.table)}), 'select'), false) as readable`);
  if (!held?.locked || !held.readable) return false;
  try {
    const [seen] = await source<{ same: boolean }[]>`
      select exists (
        select 1 from pg_locks
         where locktype = 'advisory' and granted and objsubid = 2
           and classid = ${k1 >>> 0}::oid and objid = ${k2 >>> 0}::oid
           and database = (select oid from pg_database where datname = current_database())) as same`;
    return seen?.same === true;
  } catch (err) {
    // A source role barred from pg_locks (not the default) cannot tell: stream, which is always right.
    if (pgErrorCode(err) === "42501") return false;
    throw err;
  }
}

/** What the server-side window needs to know about both tables, read once per task. */
export interface InDatabasePlan {
  /** The source key's type, to compare keys as that type (and use its index). */
  keyType: string;
  /** Per destination column (DestinationShape order): the expression that reads it from the source row `s`. */
  expressions: string[];
}

/**
 * A column whose type is the same on both sides is copied as it is; any other goes through text
 * and a cast to the destination's type, exactly as it does when the row travels through the worker,
 * so both paths accept and refuse the same values.
 */
export async function inDatabasePlan(
  tx: Queryable,
  config: PgTableConfig,
  shape: DestinationShape,
): Promise<InDatabasePlan> {
  const columns = await tx.execute<{ side: string; name: string; type_oid: number; type: string }>(sql`
    select 'source' as side, attname::text as name, atttypid::int as type_oid, format_type(atttypid, atttypmod) as type
      from pg_attribute where attrelid = to_regclass(${quoteQualified(config.table)}) and attnum > 0 and not attisdropped
    union all
    select 'destination', attname::text, atttypid::int, format_type(atttypid, atttypmod)
      from pg_attribute where attrelid = to_regclass(${quoteQualified(config.destination)}) and attnum > 0 and not attisdropped`);
  const find = (side: string, name: string) => columns.find((c) => c.side === side && c.name === name);
  const key = find("source", config.idColumn);
  if (!key) throw new PermanentError(`source table has no column ${config.idColumn}`);
  const expressions = shape.columns.map((c) => {
    const from = config.mapping.get(c.name)!;
    const source = find("source", from);
    const destination = find("destination", c.name);
    if (!source || !destination) throw new PermanentError(`column ${from} → ${c.name} is missing`);
    return source.type_oid === destination.type_oid
      ? `s.${quoteIdent(from)}`
      : `s.${quoteIdent(from)}::text::${c.type}`;
  });
  return { keyType: key.type, expressions };
}

/** A window's first and last row in the walk's order: its key and, in time mode, its time as text. */
export interface WindowSpan {
  first: { id: string; time: string | null };
  last: { id: string; time: string | null };
}

/**
 * The window's upsert, done by the server: the source rows with the window's keys, inserted or
 * overwritten by key as the client-side upsert does. A key the source no longer holds (deleted
 * after the page was read) is skipped with a reason: there is nothing left to copy.
 *
 * Given the window's span, it first tries the span itself (copyInDatabaseSpan): the rows between
 * its first and last key, one index range scan in the walk's order, where looking each key up cost
 * the server ~10 % more. Only when the source changed under the page is the window copied by key.
 */
export async function copyInDatabase(
  tx: Queryable,
  config: PgTableConfig,
  shape: DestinationShape,
  plan: InDatabasePlan,
  tenantId: string,
  keys: readonly string[],
  span?: WindowSpan,
): Promise<RowResult[]> {
  let counted: { written: number; created: number; missing: ReadonlySet<string> } | undefined;
  if (span && keys.length > 1)
    counted = await copyInDatabaseSpan(tx, config, shape, plan, tenantId, keys, span);
  if (!counted) {
    const from = sql`${sql.raw(quoteQualified(config.table))} s
       where s.${sql.raw(quoteIdent(config.idColumn))} = any(${sql.param([...keys])}::text[]::${sql.raw(plan.keyType)}[])`;
    const select = plan.expressions.map((e) => sql.raw(e));
    counted = await upsertWindowCounted(tx, config, shape, tenantId, select, from, keys);
  }
  // Every key is written or missing, once: anything else (a key listed twice) would count rows that
  // were not written, and the slot's counts are what verification checks.
  if (counted.written + counted.missing.size !== keys.length)
    throw new PermanentError(
      `an in-database window of ${keys.length} keys wrote ${counted.written} rows and found ${counted.missing.size} missing`,
    );
  // Which of the written rows were new is not known per key, only how many: a ledger-less window's
  // rows are counted (created, already here), never told apart, so the first `created` of them
  // stand for the new ones.
  let created = counted.created;
  return keys.map((k): RowResult => {
    if (counted.missing.has(k))
      return { action: "skipped", reason: "no longer in the source table when its window was copied" };
    return { action: "upserted", replaced: created-- <= 0 };
  });
}

/**
 * The window by its span, in one statement that writes only if the span still holds exactly the
 * page's keys: the keys in the span (an index-only scan) are counted and their hashes summed, as
 * are the page's, and the upsert's rows pass only when both agree. The statement's one snapshot
 * makes the check and the write see the same rows, so a row added inside the span since the page
 * was read (it would be written but not counted) or one gone (counted but not there) makes it write
 * nothing; the window is then copied by key (undefined). (An md5 of the span's keys in the walk's
 * order, sent instead of the keys, cost more: the ordered aggregate sorts its 5,000 keys again,
 * 9.4 ms a window against 1.8 for the hash sum.)
 */
async function copyInDatabaseSpan(
  tx: Queryable,
  config: PgTableConfig,
  shape: DestinationShape,
  plan: InDatabasePlan,
  tenantId: string,
  keys: readonly string[],
  span: WindowSpan,
): Promise<{ written: number; created: number; missing: ReadonlySet<string> } | undefined> {
  const id = `s.${quoteIdent(config.idColumn)}`;
  const keyType = sql.raw(plan.keyType);
  const time = config.timeColumn ? `s.${quoteIdent(config.timeColumn)}` : undefined;
  const { first, last } = span;
  const inSpan =
    time && first.time !== null && last.time !== null
      ? sql`(${sql.raw(time)}, ${sql.raw(id)}) >= (${first.time}::timestamptz, ${first.id}::text::${keyType})
        and (${sql.raw(time)}, ${sql.raw(id)}) <= (${last.time}::timestamptz, ${last.id}::text::${keyType})`
      : sql`${sql.raw(id)} >= ${first.id}::text::${keyType} and ${sql.raw(id)} <= ${last.id}::text::${keyType}`;
  const table = sql.raw(quoteQualified(config.table));
  const select = plan.expressions.map((e) => sql.raw(e));
  const from = sql`${table} s where ${inSpan} and (select same from page)`;
  // Prepared (db prepared.ts): a run's windows all send this text.
  const [row] = await executePrepared<{ same: boolean; written: number; created: number }>(
    tx,
    sql`
    with page as (
      select count(*) = ${keys.length}::int
             and coalesce(sum(hashtextextended(${sql.raw(id)}::text, 0)::numeric), 0)
               = (select coalesce(sum(hashtextextended(x, 0)::numeric), 0) from unnest(${sql.param([...keys])}::text[]) as x)
             as same
        from ${table} s where ${inSpan}),
    up as (${upsertReturning(config, shape, tenantId, select, from)})
    select (select same from page) as same, count(*)::int as written,
           (count(*) filter (where up.inserted))::int as created
      from up`,
  );
  if (!row?.same) return undefined;
  return { written: row.written, created: row.created, missing: new Set() };
}
