import {
  REDRIVE_SEED_KEY_PREFIX,
  type RowRedrive,
  type SourceRow,
  type TaskContext,
  type TaskResult,
} from "@drover/provider-sdk";
import { BATCH_READ_MAX, readByIds } from "./batch-read.js";
import { runSettings } from "./config.js";
import { parentsOf } from "./list-walk.js";
import { isObjectType, type ObjectType } from "./object-types.js";
import { pageRows } from "./page-rows.js";
import type { ProductRow } from "./product-rows.js";
import type { ReadRow } from "./records.js";
import { clientFor } from "./run-client.js";
import { runProperties } from "./run-properties.js";
import { batchFor } from "./writers.js";

/** A re-drive task's cursor: the rows to read again (a batch read's 100), in the order written. */
export interface RedriveCursor {
  redrive: string[];
}

export function isRedriveCursor(cursor: Record<string, unknown>): boolean {
  return Array.isArray(cursor.redrive);
}

/** Re-drive for HubSpot: every type is read again by id, a hundred a request (batch read). */
export const hubspotRedrive: RowRedrive = {
  reads: () => "by-id",
  refuses: (kind) => (isObjectType(kind) ? undefined : `the hubspot source has no rows of kind "${kind}"`),
  seeds(kind, rows, key) {
    const ids = rows.map((r) => r.sourceId);
    const seeds = [];
    for (let i = 0; i < ids.length; i += BATCH_READ_MAX) {
      const cursor: RedriveCursor = { redrive: ids.slice(i, i + BATCH_READ_MAX) };
      seeds.push({
        kind,
        seedKey: `${REDRIVE_SEED_KEY_PREFIX}${key}:${kind}:${i / BATCH_READ_MAX}`,
        cursor: { ...cursor },
      });
    }
    return seeds;
  },
};

/**
 * A re-drive task: its rows read by id, live first and then, for those the live read misses,
 * archived (a record deleted since is written with its deletion mark, as the list walk writes it),
 * and written through the ledger like a first pass's. A row the source has in neither is a row
 * error, noted again.
 */
export async function redriveRows(ctx: TaskContext, type: ObjectType): Promise<TaskResult> {
  const { redrive: ids } = ctx.task.cursor as unknown as RedriveCursor;
  const { settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, ctx.pacer);
  const properties = await runProperties(ctx, client, type);
  const live = await readByIds(client, type, ids, { properties: properties.names, signal: ctx.signal });
  const missed = live.misses.map((m) => m.id);
  const archived =
    missed.length > 0
      ? await readByIds(client, type, missed, {
          properties: properties.names,
          archived: true,
          signal: ctx.signal,
        })
      : { rows: [], misses: [] };
  const byId = new Map<string, ReadRow>();
  for (const row of [...live.rows, ...archived.rows]) if ("record" in row) byId.set(row.record.id, row);
  const found = ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
  const parsed = new Map(
    (await pageRows(client, type, found, properties.custom, ctx.signal)).map((r) => [r.sourceId, r]),
  );
  const rows: SourceRow<ProductRow>[] = ids.map(
    (id) =>
      parsed.get(id) ?? {
        sourceId: id,
        data: { rowError: "no longer in the source (neither live nor archived)" },
      },
  );
  await ctx.writeBatches(
    rows,
    async (toWrite) => batchFor(type, ctx.run.tenantId, await ctx.resolveParents(parentsOf(type, toWrite))),
    { windowSize: settings.windowSize },
  );
  return {};
}
