import { executePrepared, type Queryable } from "@drover/db/connection";
import { PermanentError } from "@drover/provider-sdk";
import { type SQL, sql } from "drizzle-orm";
import { keyDestination, type PgTableConfig, quoteIdent, quoteQualified } from "./config.js";

/** The destination's columns as the writer needs them: each mapped column and the type to cast its text to. */
export interface DestinationShape {
  /** Destination columns in mapping order, with their types as `"schema"."type"`. */
  columns: { name: string; type: string }[];
  /** The ON CONFLICT target: the tenant column (if any) and the key's column. */
  conflict: string[];
  /** The tenant column's type, `"schema"."type"`, when there is one. */
  tenantType?: string | undefined;
}

/**
 * Reads the destination's columns from information_schema and checks that every mapped column and
 * the tenant column exist, and that a unique index covers exactly the conflict target (what makes a
 * rewrite an update instead of a duplicate, invariant 2 without a ledger).
 */
export async function destinationShape(q: Queryable, config: PgTableConfig): Promise<DestinationShape> {
  const { schema, name } = config.destination;
  const rows = await q.execute<{ column_name: string; udt_schema: string; udt_name: string }>(sql`
    select column_name, udt_schema, udt_name from information_schema.columns
     where table_schema = ${schema} and table_name = ${name}`);
  if (rows.length === 0) throw new PermanentError(`destination table ${schema}.${name} does not exist`);
  const types = new Map(
    rows.map((r) => [r.column_name, `${quoteIdent(r.udt_schema)}.${quoteIdent(r.udt_name)}`]),
  );
  const wanted = [...config.mapping.keys(), ...(config.tenantColumn ? [config.tenantColumn] : [])];
  const missing = wanted.filter((c) => !types.has(c));
  if (missing.length > 0)
    throw new PermanentError(`destination table ${schema}.${name} has no column(s) ${missing.join(", ")}`);
  const conflict = [...(config.tenantColumn ? [config.tenantColumn] : []), keyDestination(config)];
  const [unique] = await q.execute<{ ok: boolean }>(sql`
    select exists (
      select 1 from pg_index i
       where i.indrelid = to_regclass(${quoteQualified(config.destination)}) and i.indisunique and i.indpred is null
         and (select array_agg(a.attname::text order by a.attname::text) from pg_attribute a
               where a.attrelid = i.indrelid and a.attnum = any(i.indkey)) = ${sql.param([...conflict].sort())}::text[]
    ) as ok`);
  if (!unique?.ok)
    throw new PermanentError(
      `destination table ${schema}.${name} needs a unique index on (${conflict.join(", ")}): rewrites must be idempotent upserts`,
    );
  return {
    columns: [...config.mapping.keys()].map((c) => ({ name: c, type: types.get(c)! })),
    conflict,
    tenantType: config.tenantColumn ? types.get(config.tenantColumn) : undefined,
  };
}

/**
 * The one upsert both paths run: `select` (one expression per destination column, in shape order)
 * over `from`, inserted under the run's tenant, and a row whose key is already there overwritten,
 * which is what makes a rewritten window idempotent. It returns each row's key as text and whether
 * the row is new (`xmax = 0` tells a fresh insert from an overwrite).
 */
export function upsertReturning(
  config: PgTableConfig,
  shape: DestinationShape,
  tenantId: string,
  select: readonly SQL[],
  from: SQL,
): SQL {
  const keyColumn = keyDestination(config);
  const target = [
    ...(config.tenantColumn ? [quoteIdent(config.tenantColumn)] : []),
    ...shape.columns.map((c) => quoteIdent(c.name)),
  ];
  const values = [...(config.tenantColumn ? [sql`${tenantId}::text`] : []), ...select];
  const updatable = shape.columns.filter((c) => !shape.conflict.includes(c.name));
  const set = (updatable.length > 0 ? updatable : [{ name: keyColumn }])
    .map((c) => `${quoteIdent(c.name)} = excluded.${quoteIdent(c.name)}`)
    .join(", ");
  return sql`
    insert into ${sql.raw(quoteQualified(config.destination))} (${sql.raw(target.join(", "))})
    select ${sql.join([...values], sql`, `)}
      from ${from}
    on conflict (${sql.raw(shape.conflict.map(quoteIdent).join(", "))}) do update set ${sql.raw(set)}
    returning ${sql.raw(quoteIdent(keyColumn))}::text as k, (xmax = 0) as inserted`;
}

/** The upsert, with whether each row is new, by key as text (RETURNING promises no order). */
export async function upsertWindow(
  q: Queryable,
  config: PgTableConfig,
  shape: DestinationShape,
  tenantId: string,
  select: readonly SQL[],
  from: SQL,
): Promise<Map<string, boolean>> {
  const returned = await executePrepared<{ k: string; inserted: boolean }>(
    q,
    upsertReturning(config, shape, tenantId, select, from),
  );
  return new Map(returned.map((r) => [r.k, r.inserted]));
}

/**
 * The upsert of a window of `keys` answered in one row instead of one per key: how many rows it
 * wrote and how many of them were new, and, only when it wrote fewer than `keys`, the keys it did
 * not find. For the in-database copy, whose rows never reach the worker: a row back per key was a
 * second trip of every key, for counts.
 */
export async function upsertWindowCounted(
  q: Queryable,
  config: PgTableConfig,
  shape: DestinationShape,
  tenantId: string,
  select: readonly SQL[],
  from: SQL,
  keys: readonly string[],
): Promise<{ written: number; created: number; missing: ReadonlySet<string> }> {
  const [row] = await executePrepared<{ written: number; created: number; missing: string[] | null }>(
    q,
    sql`
    with up as (${upsertReturning(config, shape, tenantId, select, from)})
    select count(*)::int as written, (count(*) filter (where up.inserted))::int as created,
           case when count(*) < ${keys.length}::int then
             (select coalesce(array_agg(x.k), '{}') from unnest(${sql.param([...keys])}::text[]) as x(k)
               where not exists (select 1 from up u where u.k = x.k))
           end as missing
      from up`,
  );
  return { written: row?.written ?? 0, created: row?.created ?? 0, missing: new Set(row?.missing ?? []) };
}
