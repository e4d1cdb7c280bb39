import {
  type BatchWriter,
  PermanentError,
  REDRIVE_SEED_KEY_PREFIX,
  type RowRedrive,
  type SourceRow,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import { copyRow, copyWindow, sourceColumns } from "./binary-copy.js";
import { quoteQualified, runConfig } from "./config.js";
import { copySizes, StreamedSizing, streamingTask } from "./copy-sizes.js";
import { type DestinationShape, destinationShape } from "./destination-table.js";
import { PG_TABLE_KIND } from "./slots.js";
import {
  checkSourceTable,
  readPage,
  type SlotCursor,
  type SourceRecord,
  sourceDatabase,
  sourceKey,
} from "./source-table.js";

/**
 * Keys one re-drive task takes: a slot's failed rows beyond it are split across tasks (in time mode
 * each of them walks the slot), so no cursor, rewritten at every checkpoint, grows without bound.
 */
const KEYS_PER_TASK = 10_000;

/** A re-drive task's cursor: the slot's bounds and keyset position, and the keys it writes. */
export interface RedriveSlotCursor extends SlotCursor {
  redrive: string[];
}

export function isRedriveSlotCursor(cursor: Record<string, unknown>): boolean {
  return Array.isArray(cursor.redrive);
}

/**
 * Re-drive for pg-table, which has no read by key: rows are read again by walking, in keyset pages,
 * the slot whose task noted them (the slot's bounds are in that task's cursor), and only the rows
 * asked for are written. With a ULID key the walk seeks: each page starts at the next key wanted,
 * so it reads the pages that hold the rows, never the stretches between them. Ordered by a time
 * column it cannot seek (a note keeps the key, not the time), and walks the slot from its start.
 */
export const pgTableRedrive: RowRedrive = {
  reads() {
    return "by-listing";
  },
  refuses(kind) {
    return kind === PG_TABLE_KIND ? undefined : `the pg-table source has no rows of kind "${kind}"`;
  },
  seeds(kind, rows, key): TaskSeed[] {
    const bySlot = new Map<string, { from: number; to: number; keys: string[] }>();
    for (const row of rows) {
      const from = Number(row.listedIn?.from);
      const to = Number(row.listedIn?.to);
      if (!Number.isFinite(from) || !Number.isFinite(to) || from >= to)
        throw new PermanentError(`row ${row.sourceId} was noted by a task that names no slot`);
      const slot = bySlot.get(`${from}:${to}`) ?? { from, to, keys: [] };
      slot.keys.push(row.sourceId);
      bySlot.set(`${from}:${to}`, slot);
    }
    const seeds: TaskSeed[] = [];
    for (const { from, to, keys } of bySlot.values()) {
      // Key order, as the walk meets them. ULIDs (Crockford base32, one case, one length) sort the
      // same in every collation as in JavaScript.
      keys.sort();
      for (let i = 0; i < keys.length; i += KEYS_PER_TASK) {
        const cursor: RedriveSlotCursor = { from, to, redrive: keys.slice(i, i + KEYS_PER_TASK) };
        seeds.push({
          kind,
          seedKey: `${REDRIVE_SEED_KEY_PREFIX}${key}:slot:${new Date(from).toISOString()}:${i / KEYS_PER_TASK}`,
          cursor: { ...cursor },
        });
      }
    }
    return seeds;
  },
};

/**
 * A re-drive task: walks its slot in keyset pages from its checkpoint (seeking to the next key
 * wanted when the key orders the slot), and writes the page's wanted rows on the streamed path,
 * each window settling the run's earlier notes about the rows it wrote (WriteOptions.settlesNotes).
 * Every checkpoint is a keyset position, the last row written or the page's last row, so a retry
 * reads on after it. A key no longer in the slot is not found and keeps its note.
 */
export async function redriveSlot(ctx: TaskContext): Promise<TaskResult> {
  const config = runConfig(ctx.run);
  const connection = ctx.run.secret ?? "";
  const source = sourceDatabase(connection);
  await checkSourceTable(source, connection, config);
  const start = ctx.task.cursor as unknown as RedriveSlotCursor;
  const slot = { from: Number(start.from), to: Number(start.to) };
  const wanted = start.redrive;
  const want = new Set(wanted);
  const tenantId = ctx.run.tenantId;
  // Pages and windows sized by the rows' width, as a copy's are (copy-sizes.ts).
  const sizing = new StreamedSizing(
    `${sourceKey(connection)}|${quoteQualified(config.table)}`,
    copySizes(config, "streamed"),
  );
  const columns = await sourceColumns(source, config, quoteQualified(config.table));
  let shape: DestinationShape | undefined;
  const writer: BatchWriter<SourceRecord> = {
    async writeBatch(tx, rows) {
      shape ??= await destinationShape(tx, config);
      return copyWindow(tx, config, shape, columns, tenantId, rows);
    },
    async writeRow(tx, row, sourceId) {
      shape ??= await destinationShape(tx, config);
      return copyRow(tx, config, shape, columns, tenantId, { sourceId, data: row });
    },
  };
  const at = (record: SourceRecord): RedriveSlotCursor => ({
    ...slot,
    redrive: wanted,
    lastId: record.id,
    ...(config.timeColumn && record.time !== null ? { lastTime: record.time } : {}),
  });

  // A re-drive holds rows as a copy does: it shares the worker's bytes with the copies.
  const leave = streamingTask();
  try {
    let cursor: SlotCursor = start;
    for (;;) {
      ctx.signal.throwIfAborted();
      let startAt: string | undefined;
      if (!config.timeColumn) {
        startAt = wanted.find((k) => cursor.lastId === undefined || k > cursor.lastId);
        if (startAt === undefined) break;
      }
      const sizes = sizing.sizes();
      const page = await readPage(source, config, cursor, sizes.page, columns, startAt);
      const full = page.length === sizes.page;
      sizing.learn(page);
      const rows: SourceRow<SourceRecord>[] = page
        .filter((r) => want.has(r.id))
        .map((r) => ({ sourceId: r.id, data: r }));
      const last = page.at(-1);
      await ctx.writeBatches(rows, writer, {
        windowSize: sizing.sizes().window,
        settlesNotes: true,
        cursorAfter: (row) => ({ ...at(row.data as SourceRecord) }),
        // A full page's walk goes on after its last row, written or not.
        ...(full && last ? { nextCursor: { ...at(last) } } : {}),
      });
      ctx.working();
      if (!full || !last) break;
      cursor = at(last);
    }
  } finally {
    leave();
  }
  return {};
}
