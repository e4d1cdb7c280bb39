import type { Tx } from "@drover/db/connection";
import {
  type BatchWriter,
  PermanentError,
  type Provider,
  type SourceRow,
  type TaskContext,
  type TaskResult,
} from "@drover/provider-sdk";
import { copyRow, copyWindow, type SourceColumns, sourceColumns } from "./binary-copy.js";
import {
  connectionProblem,
  type PgTableConfig,
  parsePgTableSettings,
  quoteQualified,
  runConfig,
} from "./config.js";
import { copySizes, StreamedSizing, streamingTask } from "./copy-sizes.js";
import { type DestinationShape, destinationShape } from "./destination-table.js";
import {
  copyInDatabase,
  type InDatabasePlan,
  inDatabasePlan,
  settledSharing,
  sharesDatabase,
} from "./in-database-copy.js";
import { isRedriveSlotCursor, pgTableRedrive, redriveSlot } from "./redrive.js";
import { PG_TABLE_KIND, slotSeeds } from "./slots.js";
import {
  checkSourceTable,
  readPage,
  type SlotCursor,
  type SourceRecord,
  sourceDatabase,
  sourceKey,
} from "./source-table.js";
import { pgTableVerifier } from "./verifier.js";

/** The run fact saying how the run's windows are written: "in-database" or "streamed". */
export const COPY_PATH_FACT = "pg-table.copy";

/**
 * pg-table: copies a large Postgres table (e.g. room_events: ULID id, room id, JSON data) into
 * a destination table of the product database, one task per time slot. No ledger: the destination
 * is keyed by the source id, so a rewrite after a crash is an idempotent upsert, and each task
 * counts the rows it read and wrote.
 */
export const pgTableProvider: Provider = {
  name: "pg-table",
  phases: [[PG_TABLE_KIND]],
  ledger: "none",
  verifier: pgTableVerifier,
  redrive: pgTableRedrive,

  validateConfig({ apiToken, settings }) {
    const problem = connectionProblem(apiToken);
    if (problem) return problem;
    const parsed = parsePgTableSettings(settings);
    return typeof parsed === "string" ? parsed : undefined;
  },

  async seedPhase(ctx) {
    const config = runConfig(ctx.run);
    // The destination is in the product database: checked now, so a wrong name fails the start.
    await destinationShape(ctx.tx, config);
    return slotSeeds(config);
  },

  runTask: (ctx) => (isRedriveSlotCursor(ctx.task.cursor) ? redriveSlot(ctx) : copySlot(ctx)),
};

/**
 * What a run's tasks read of the destination (its shape, and the in-database plan), and whether
 * the run's copy path was said (COPY_PATH_FACT), kept by the first of its tasks this process runs:
 * the catalog queries were ~15 ms of every task, ~3 % of an in-database copy of hour-long slots. A
 * task that fails forgets them, so a destination altered under a run is read again by the retry.
 */
const runPaths = new Map<string, { shape?: DestinationShape; plan?: InDatabasePlan; pathShown?: boolean }>();

function knownPath(runId: string) {
  let known = runPaths.get(runId);
  if (!known) {
    known = {};
    runPaths.set(runId, known);
    // A worker serves a few runs at once; the oldest goes first should it see thousands.
    if (runPaths.size > 1_000) runPaths.delete(runPaths.keys().next().value!);
  }
  return known;
}

/**
 * Which way one slot's rows travel: inside the database (INSERT … SELECT, when source and
 * destination share it) or streamed through the worker (binary COPY). Settled by the first window
 * (the probe needs the window's transaction), known at once when this process already asked.
 */
class SlotPath {
  /** undefined until the first window settles it. */
  inDatabase: boolean | undefined;
  readonly known: ReturnType<typeof knownPath>;
  private shape: DestinationShape | undefined;
  private plan: InDatabasePlan | undefined;
  /** How the mapped columns travel when the rows go through the worker (binary-copy.ts). */
  private columns: SourceColumns | undefined;

  constructor(
    private readonly config: PgTableConfig,
    private readonly source: ReturnType<typeof sourceDatabase>,
    private readonly connection: string,
    runId: string,
  ) {
    this.inDatabase = config.inDatabaseCopy ? settledSharing(connection, config) : false;
    this.known = knownPath(runId);
    this.shape = this.known.shape;
    this.plan = this.known.plan;
  }

  /** The columns a page reads when its rows go through the worker; none while they may not. */
  async columnsToRead(): Promise<SourceColumns | undefined> {
    if (this.inDatabase) return undefined;
    this.columns ??= await sourceColumns(this.source, this.config, quoteQualified(this.config.table));
    return this.columns;
  }

  private async settle(tx: Tx): Promise<{ shape: DestinationShape; plan: InDatabasePlan | undefined }> {
    const { config, known } = this;
    this.shape ??= known.shape = await destinationShape(tx, config);
    this.inDatabase ??= await sharesDatabase(tx, this.source, this.connection, config);
    if (this.inDatabase) this.plan ??= known.plan = await inDatabasePlan(tx, config, this.shape);
    return { shape: this.shape, plan: this.inDatabase ? this.plan : undefined };
  }

  /** The slot's writer: each window (or, rewritten row by row, each row) by the settled path. */
  writer(tenantId: string): BatchWriter<SourceRecord> {
    const { config } = this;
    return {
      writeBatch: async (tx, rows) => {
        const path = await this.settle(tx);
        if (!path.plan) return copyWindow(tx, config, path.shape, this.columns!, tenantId, rows);
        const keys = rows.map((r) => r.sourceId);
        // The rows are in the walk's order: the window spans its first row to its last.
        const [first, last] = [rows[0]!.data, rows[rows.length - 1]!.data];
        return copyInDatabase(tx, config, path.shape, path.plan, tenantId, keys, { first, last });
      },
      // The row-by-row rewrite of a window that failed: the same path, one row per savepoint.
      writeRow: async (tx, row, sourceId) => {
        const path = await this.settle(tx);
        if (!path.plan)
          return copyRow(tx, config, path.shape, this.columns!, tenantId, { sourceId, data: row });
        const [result] = await copyInDatabase(tx, config, path.shape, path.plan, tenantId, [sourceId]);
        return result!;
      },
    };
  }
}

/**
 * Walks the slot by keyset from the checkpoint's last_id, a page at a time (the next page read
 * while this one is written), and writes each page in windows of one upsert. Each window's
 * checkpoint is the last key it wrote, so a retry or a resume reads on right after it: no row is
 * read twice once committed, and none is skipped. An empty slot is one query.
 */
async function copySlot(ctx: TaskContext): Promise<TaskResult> {
  const config = runConfig(ctx.run);
  if (ctx.task.kind !== PG_TABLE_KIND) throw new PermanentError(`pg-table has no kind "${ctx.task.kind}"`);
  const connection = ctx.run.secret ?? "";
  const source = sourceDatabase(connection);
  await checkSourceTable(source, connection, config);
  const slot = { from: Number(ctx.task.cursor.from), to: Number(ctx.task.cursor.to) };
  const tenantId = ctx.run.tenantId;

  const path = new SlotPath(config, source, connection, ctx.run.id);
  const writer = path.writer(tenantId);
  const cursorAfter = (row: SourceRow<SourceRecord>): Record<string, unknown> => {
    const time = (row.data as SourceRecord).time;
    return {
      ...slot,
      lastId: row.sourceId,
      ...(config.timeColumn && time !== null ? { lastTime: time } : {}),
    };
  };

  const start = ctx.task.cursor as unknown as SlotCursor;
  // Streamed pages and windows are sized by the width of the rows (copy-sizes.ts).
  const streamed = new StreamedSizing(
    `${sourceKey(connection)}|${quoteQualified(config.table)}`,
    copySizes(config, "streamed"),
  );
  const sizesNow = () => (path.inDatabase ? copySizes(config, "in-database") : streamed.sizes());
  // A streamed page is one window (at most the run's windowSize), whatever the sizes say by the time
  // it is written: it was sized when it was read, for as many copies as the worker ran then, and a
  // window streams to the server as it is made (binary-copy.ts), so it holds no bytes of its own.
  // Re-cut for the copies running at write time, a 5,000-row page read while the other lane was
  // between tasks went as 2,976 rows and then 2,024: a fifth more windows (and commits) in the
  // bench than pages (FINDINGS, 2026-12-07).
  const windowOf = (page: readonly SourceRecord[]) =>
    path.inDatabase
      ? copySizes(config, "in-database").window
      : Math.min(copySizes(config, "streamed").window, Math.max(1, page.length));
  // Until the path is known, a page carries the rows (the first window may well need them) and has
  // the streamed path's size.
  const readAfter = async (cursor: SlotCursor) => {
    const limit = sizesNow().page;
    const columns = await path.columnsToRead();
    const page = await readPage(source, config, cursor, limit, columns);
    return { page, full: page.length === limit };
  };
  // Counted among the worker's streamed copies, which share its bytes, until it is known to copy
  // inside the database (its rows never reach the worker) or ends.
  const leave = streamingTask();
  try {
    let next = readAfter(start);
    for (;;) {
      ctx.signal.throwIfAborted();
      const { page, full } = await next;
      if (path.inDatabase) leave();
      if (page.length === 0) break;
      streamed.learn(page);
      if (full) {
        const last = page[page.length - 1]!;
        next = readAfter({
          ...slot,
          lastId: last.id,
          ...(last.time !== null ? { lastTime: last.time } : {}),
        });
        // Awaited on the next turn; until then a failure must not count as unhandled.
        next.catch(() => {});
      }
      // The window's size is the path's, once the path is known (the first window settles it).
      await ctx.writeBatches(
        page.map((r) => ({ sourceId: r.id, data: r })),
        writer,
        { windowSize: windowOf(page), cursorAfter },
      );
      if (!path.known.pathShown && path.inDatabase !== undefined) {
        // For operators (GetRun's facts): which way this run's rows travel. The first task to know
        // says, once per process (it was a statement of every task: ~2 round trips in ~30 ms of a
        // task's own time outside the server).
        await ctx.settleRunFact(COPY_PATH_FACT, path.inDatabase ? "in-database" : "streamed");
        path.known.pathShown = true;
      }
      ctx.working();
      if (!full) break;
    }
  } catch (err) {
    runPaths.delete(ctx.run.id);
    throw err;
  } finally {
    leave();
  }
  return {};
}
