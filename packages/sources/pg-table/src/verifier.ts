import type { Queryable } from "@drover/db/connection";
import type {
  KindVerification,
  ProviderVerifier,
  SlotVerification,
  VerifyContext,
} from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import {
  keyDestination,
  type PgTableConfig,
  quoteIdent,
  quoteQualified,
  runConfig,
  timeDestination,
} from "./config.js";
import { destinationShape } from "./destination-table.js";
import { slotName, slotsOf } from "./slots.js";
import { type SlotCursor, slotPredicate, sourceDatabase } from "./source-table.js";

/**
 * Verification of a pg-table run, slot by slot, without a ledger:
 * - counts: the slot's rows in the source against the destination's rows in the same bounds (plus
 *   the rows this run noted as failed); where they differ, both key lists are walked and every
 *   missing or unexpected key is listed;
 * - a sample of the slot's source rows (a fixed pseudo-random order per run), read again and
 *   compared column by column with the destination row of the same key, in the destination
 *   database with the value cast to the column's type (so json text and jsonb compare as values).
 */

type Sql = ReturnType<typeof sourceDatabase>;

/** Longest value quoted in a mismatch; JSON payloads run to kilobytes. */
const SHOWN = 80;
/** Keys read per statement when two key lists are compared. */
const KEY_PAGE = 10_000;

function shown(v: string | null): string {
  if (v === null) return "null";
  return JSON.stringify(v.length > SHOWN ? `${v.slice(0, SHOWN)}…` : v);
}

function destinationPredicate(config: PgTableConfig, slot: { from: number; to: number }, firstParam: number) {
  return slotPredicate(config, slot, firstParam, {
    id: keyDestination(config),
    time: timeDestination(config),
  });
}

async function countSource(source: Sql, config: PgTableConfig, slot: SlotCursor): Promise<number> {
  const where = slotPredicate(config, slot, 1, { id: config.idColumn, time: config.timeColumn });
  const [r] = await source.unsafe<{ n: string }[]>(
    `select count(*)::text as n from ${quoteQualified(config.table)} where ${where.text}`,
    where.params,
  );
  return Number(r!.n);
}

/** The destination side of a slot, as raw SQL with its parameters ($1 is the tenant when there is one). */
function destinationScope(config: PgTableConfig, tenantId: string, slot: SlotCursor) {
  const params: string[] = config.tenantColumn ? [tenantId] : [];
  const where = destinationPredicate(config, slot, params.length + 1);
  const tenant = config.tenantColumn ? `${quoteIdent(config.tenantColumn)} = $1 and ` : "";
  return { text: `${tenant}${where.text}`, params: [...params, ...where.params] };
}

async function countDestination(db: Queryable, config: PgTableConfig, tenantId: string, slot: SlotCursor) {
  const scope = destinationScope(config, tenantId, slot);
  const [r] = await db.execute<{ n: string }>(
    rawWithParams(
      `select count(*)::text as n from ${quoteQualified(config.destination)} where ${scope.text}`,
      scope.params,
    ),
  );
  return Number(r!.n);
}

/** drizzle's sql with `$n` placeholders replaced by bound parameters, for statements built from checked identifiers. */
function rawWithParams(text: string, params: readonly unknown[]) {
  const chunks = text.split(/\$(\d+)/);
  const out = [sql.raw(chunks[0]!)];
  for (let i = 1; i < chunks.length; i += 2) {
    out.push(sql`${params[Number(chunks[i]) - 1]}`, sql.raw(chunks[i + 1]!));
  }
  return sql.join(out, sql``);
}

async function sourceKeys(
  source: Sql,
  config: PgTableConfig,
  slot: SlotCursor,
  failed?: string[],
): Promise<string[]> {
  const where = slotPredicate(config, slot, 1, { id: config.idColumn, time: config.timeColumn });
  const id = quoteIdent(config.idColumn);
  if (failed) {
    const rows = await source.unsafe<{ k: string }[]>(
      `select ${id}::text as k from ${quoteQualified(config.table)} where ${where.text} and ${id}::text = any($3::text[])`,
      [...where.params, failed as never],
    );
    return rows.map((r) => r.k);
  }
  const keys: string[] = [];
  for (let after: string | null = null; ; ) {
    const params: unknown[] = [...where.params, after, KEY_PAGE];
    const rows: { k: string }[] = await source.unsafe<{ k: string }[]>(
      `select ${id}::text as k from ${quoteQualified(config.table)}
        where ${where.text} and ($3::text is null or ${id}::text > $3::text) order by ${id}::text limit $4`,
      params as never,
    );
    keys.push(...rows.map((r) => r.k));
    if (rows.length < KEY_PAGE) return keys;
    after = rows[rows.length - 1]!.k;
  }
}

async function destinationKeys(db: Queryable, config: PgTableConfig, tenantId: string, slot: SlotCursor) {
  const scope = destinationScope(config, tenantId, slot);
  const key = quoteIdent(keyDestination(config));
  const rows = await db.execute<{ k: string }>(
    rawWithParams(
      `select ${key}::text as k from ${quoteQualified(config.destination)} where ${scope.text}`,
      scope.params,
    ),
  );
  return rows.map((r) => r.k);
}

/** The slot's sample, compared column by column; one mismatch per differing column or missing row. */
async function compareSlotSample(
  source: Sql,
  db: Queryable,
  config: PgTableConfig,
  runId: string,
  tenantId: string,
  slot: SlotCursor,
  size: number,
  failed: ReadonlySet<string>,
): Promise<{ sampled: number; mismatches: string[] }> {
  const where = slotPredicate(config, slot, 1, { id: config.idColumn, time: config.timeColumn });
  const sources = [...config.mapping.values()];
  const picked = await source.unsafe<Record<string, string | null>[]>(
    `select ${quoteIdent(config.idColumn)}::text as k, ${sources.map((c, i) => `${quoteIdent(c)}::text as c${i}`).join(", ")}
       from ${quoteQualified(config.table)} where ${where.text}
      order by md5(${quoteIdent(config.idColumn)}::text || $3) limit $4`,
    [...where.params, runId, size],
  );
  if (picked.length === 0) return { sampled: 0, mismatches: [] };
  const shape = await destinationShape(db, config);
  const keyColumn = keyDestination(config);
  const keyIndex = shape.columns.findIndex((c) => c.name === keyColumn);
  const cols = shape.columns;
  const arrays = cols.map((_, i) => picked.map((p) => p[`c${i}`] ?? null));
  const unnest = sql.join(
    arrays.map((a) => sql`${sql.param(a)}::text[]`),
    sql`, `,
  );
  const tenant = config.tenantColumn
    ? sql` and d.${sql.raw(quoteIdent(config.tenantColumn))} = ${tenantId}`
    : sql``;
  const compared = await db.execute<Record<string, string | boolean | null>>(sql`
    select s.c${sql.raw(String(keyIndex))} as k, (d.ctid is null) as missing,
           ${sql.raw(
             cols
               .map((c, i) => {
                 const same = `(d.${quoteIdent(c.name)} is not distinct from s.c${i}::${c.type})`;
                 // The destination's value comes back only where it differs: it is quoted in the
                 // mismatch, and a sample of kilobyte JSON rows is otherwise read back whole.
                 return `${same} as e${i}, case when ${same} then null else d.${quoteIdent(c.name)}::text end as d${i}`;
               })
               .join(", "),
           )}
      from unnest(${unnest}) as s(${sql.raw(cols.map((_, i) => `c${i}`).join(", "))})
      left join ${sql.raw(quoteQualified(config.destination))} d
        on d.${sql.raw(quoteIdent(keyColumn))} = s.c${sql.raw(String(keyIndex))}::${sql.raw(cols[keyIndex]!.type)}${tenant}`);
  const bySource = new Map(picked.map((p) => [p[`c${keyIndex}`] as string, p]));
  const mismatches: string[] = [];
  const where2 = `${config.destination.schema}.${config.destination.name}`;
  for (const row of compared) {
    const k = String(row.k);
    if (row.missing) {
      // A row noted as failed has no destination row by design; its note accounts for it.
      if (failed.has(k)) continue;
      mismatches.push(`${k}: sampled in the source, but not in ${where2}`);
      continue;
    }
    cols.forEach((c, i) => {
      if (row[`e${i}`] === true) return;
      mismatches.push(
        `${k}: ${c.name} is ${shown(bySource.get(k)?.[`c${i}`] ?? null)} in the source but ${shown((row[`d${i}`] as string | null) ?? null)} in ${where2}`,
      );
    });
  }
  return { sampled: picked.length, mismatches };
}

async function verifySlot(
  ctx: VerifyContext,
  config: PgTableConfig,
  slot: SlotCursor,
  options: { sampleSize: number; failedIds: ReadonlySet<string> },
): Promise<{ check: SlotVerification; mismatches: string[] }> {
  const source = sourceDatabase(ctx.run.secret);
  const name = slotName(slot);
  const [sourceCount, destinationCount] = await Promise.all([
    countSource(source, config, slot),
    countDestination(ctx.db, config, ctx.run.tenantId, slot),
  ]);
  const failedHere =
    options.failedIds.size > 0 && sourceCount > 0
      ? await sourceKeys(source, config, slot, [...options.failedIds])
      : [];
  const failed = new Set(failedHere);
  const mismatches: string[] = [];
  if (sourceCount !== destinationCount + failed.size) {
    mismatches.push(
      `slot ${name}: the source holds ${sourceCount} rows; the destination ${destinationCount} and ${failed.size} failed with a reason`,
    );
    const [src, dst] = await Promise.all([
      sourceKeys(source, config, slot),
      destinationKeys(ctx.db, config, ctx.run.tenantId, slot),
    ]);
    const inDestination = new Set(dst);
    const inSource = new Set(src);
    for (const k of src)
      if (!inDestination.has(k) && !failed.has(k))
        mismatches.push(
          `${k}: in the source (slot ${name}), but neither in the destination nor noted as failed (lost)`,
        );
    for (const k of dst)
      if (!inSource.has(k))
        mismatches.push(`${k}: in the destination (slot ${name}), but not in the source (unexpected)`);
  }
  const sample =
    options.sampleSize > 0 && sourceCount > 0
      ? await compareSlotSample(
          source,
          ctx.db,
          config,
          ctx.run.id,
          ctx.run.tenantId,
          slot,
          options.sampleSize,
          failed,
        )
      : { sampled: 0, mismatches: [] };
  mismatches.push(...sample.mismatches);
  return {
    check: { slot: name, sourceCount, destinationCount, failedCount: failed.size, sampled: sample.sampled },
    mismatches,
  };
}

/** Slots verified side by side: each is a few short statements on two databases. */
const SLOTS_AT_ONCE = 4;

export const pgTableVerifier: ProviderVerifier = {
  async verifyKind(ctx, _kind, options): Promise<KindVerification> {
    const config = runConfig(ctx.run);
    const sampleSize = config.sampleSize ?? options.sampleSize;
    const slots = slotsOf(config);
    const results: { check: SlotVerification; mismatches: string[] }[] = new Array(slots.length);
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(SLOTS_AT_ONCE, slots.length) }, async () => {
        while (next < slots.length) {
          ctx.signal.throwIfAborted();
          const i = next++;
          results[i] = await verifySlot(ctx, config, slots[i]!, { ...options, sampleSize });
        }
      }),
    );
    const total: KindVerification = {
      sourceCount: 0,
      destinationCount: 0,
      failedCount: 0,
      sampled: 0,
      mismatches: [],
      slots: [],
    };
    for (const r of results) {
      total.sourceCount += r.check.sourceCount;
      total.destinationCount += r.check.destinationCount;
      total.failedCount += r.check.failedCount;
      total.sampled += r.check.sampled;
      total.mismatches.push(...r.mismatches);
      total.slots.push(r.check);
    }
    return total;
  },

  /** Every key in the run's range; verifyKind is what VerifyRun uses for this ledgerless source. */
  async sourceIds(ctx) {
    const config = runConfig(ctx.run);
    const source = sourceDatabase(ctx.run.secret);
    const ids: string[] = [];
    for (const slot of slotsOf(config)) ids.push(...(await sourceKeys(source, config, slot)));
    return ids;
  },

  /** No ledger, so no ledger entries are ever sampled; verifyKind samples the source instead. */
  async compareSample() {
    return [];
  },
};
