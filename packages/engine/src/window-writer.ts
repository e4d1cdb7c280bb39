import type { Db, Tx } from "@drover/db";
import { claimLedgerSlot, claimLedgerSlots, heldSlots, type LedgerSlotClaim } from "@drover/ledger";
import {
  type BatchWriter,
  classifyError,
  DestinationSchemaError,
  describeError,
  destinationSchemaFault,
  type HeldSlot,
  isRowErrorInfo,
  type LedgerMode,
  PermanentError,
  type RowResult,
  type RowWriter,
  type RunInfo,
  type SourceRow,
  type TaskInfo,
  type WritableRow,
  type WriteOptions,
  type WriteSummary,
} from "@drover/provider-sdk";
import {
  MATCHED_BY,
  MISSING_PARENT,
  NO_PARENT,
  recordWouldBeRows,
  rolledBackInDryRun,
  type WouldBeRow,
  wouldBeRows,
} from "./dry-run.js";
import { checkpointPastHeldRows, checkpointWithoutWrites } from "./held-page.js";
import { traceWindow } from "./instrumentation.js";
import { appendNotes, type NoteInput, settleNotes } from "./notes.js";
import { type Checkpoint, LostClaimError, writeCheckpoint } from "./task-transitions.js";
import {
  DESTINATION_PROBE_MS,
  destinationWindow,
  statementWithin,
  WINDOW_DEADLINE_MS,
} from "./window-transaction.js";

/**
 * 25 rows per transaction on the per-row path. Each row gets a savepoint, and Postgres caches only
 * 64 subtransaction ids per transaction before every snapshot overflows to a slow path; 25 keeps far
 * below that while amortising the commit.
 */
export const WINDOW_SIZE = 25;
/**
 * Rows per transaction on the batched path: one multi-row statement per window opens no savepoint,
 * so the window is bounded by statement size and commit cost instead. Measured on the pg-table
 * bench (2 cores): 500 rows of ~1 KB each write at about the rate of 1,000 and hold locks half as long.
 */
export const BATCH_WINDOW_SIZE = 500;
/** Postgres's per-backend subtransaction cache (PGPROC_MAX_CACHED_SUBXIDS). Never go past it. */
export const MAX_SAVEPOINTS_PER_TRANSACTION = 64;

/** Thrown inside a row's savepoint to undo our own write when the ledger slot is already taken. */
class AlreadyHere extends Error {}

/** The batch's ledger claim lost a slot: the window is written again row by row, where a loss undoes only its row. */
class BatchLostSlots extends Error {
  constructor(lost: number) {
    super(`${lost} ledger slot(s) of the window were already taken`);
  }
}

/** A stop was requested; the window in hand has committed. */
export class TaskCancelledError extends Error {
  constructor() {
    super("the run is stopping");
    this.name = "TaskCancelledError";
  }
}

/** A transaction was about to open one savepoint too many: a bug in window sizing, never a row's fault. */
export class SavepointLimitError extends PermanentError {
  constructor(limit: number) {
    super(
      `a window transaction would open more than ${limit} savepoints (Postgres caches ${MAX_SAVEPOINTS_PER_TRANSACTION} subtransactions)`,
    );
  }
}

/**
 * Counts the savepoints of one transaction and refuses the one past the limit. The per-row path
 * takes one per row, so its window size alone keeps under the limit; this is the guard that keeps
 * it true should a window size or a fallback ever change.
 */
class SavepointBudget {
  private opened = 0;
  constructor(private readonly limit: number) {}
  take(): void {
    if (++this.opened > this.limit) throw new SavepointLimitError(this.limit);
  }
}

export interface WindowWriterDeps {
  db: Db;
  run: RunInfo;
  /** Mutated as windows commit, so the provider and the next call see the new position. */
  task: TaskInfo;
  claimToken: string;
  notesCap: number;
  /** Checked between windows: true when the run is stopping. */
  stopRequested(): Promise<boolean>;
  /** Rows per transaction on the per-row path (and for the batched path's fallback). */
  windowSize?: number;
  /** The provider's ledger mode; `per-row` when absent. */
  ledger?: LedgerMode;
  /** Savepoints one transaction may open; MAX_SAVEPOINTS_PER_TRANSACTION when absent (tests lower it). */
  savepointLimit?: number;
  /** How long one window's transaction may take; WINDOW_DEADLINE_MS when absent (tests lower it). */
  windowDeadlineMs?: number;
  /**
   * How long the run waits before its parked task tries a window again after the destination's
   * schema refused one (DestinationSchemaError); DESTINATION_PROBE_MS when absent.
   */
  destinationProbeMs?: number;
  /**
   * The source requests and tokens the task spent since the last call, added to its stats with the
   * next checkpoint (`source_requests`, `source_tokens`): what a dry run reports the run will cost.
   */
  takeSourceCalls?(): Record<string, number>;
  /** Gives back what takeSourceCalls handed to a checkpoint that was not written. */
  restoreSourceCalls?(taken: Record<string, number>): void;
}

export function emptySummary(): WriteSummary {
  return { attempted: 0, created: 0, matched: 0, alreadyHere: 0, skipped: 0, failed: 0 };
}

export function addSummary(into: WriteSummary, from: WriteSummary): void {
  into.attempted += from.attempted;
  into.created += from.created;
  into.matched += from.matched;
  into.alreadyHere += from.alreadyHere;
  into.skipped += from.skipped;
  into.failed += from.failed;
}

/** What one window did, gathered inside its transaction and kept only if it commits. */
interface WindowTally {
  summary: WriteSummary;
  /** Rows that landed in the destination (created, matched, upserted). */
  written: number;
  notes: NoteInput[];
  /**
   * Matched rows by the writer's rule (e.g. email), and skipped rows by the parent kind they miss
   * (keys `missing_parent:<kind>`), for a dry run's report.
   */
  matchedBy: Record<string, number>;
  /** A dry run's rows that would have been created or matched (dry-run.ts records them). */
  wouldBe: WouldBeRow[];
  /** Rows written on a pass that settles the run's earlier notes about them (WriteOptions.settlesNotes). */
  settled: string[];
}

function newTally(): WindowTally {
  return { summary: emptySummary(), written: 0, notes: [], matchedBy: {}, wouldBe: [], settled: [] };
}

/** In place, so the window's span and metrics (traceWindow) read the counts of the attempt that committed. */
function resetTally(tally: WindowTally): void {
  Object.assign(tally.summary, emptySummary());
  tally.written = 0;
  tally.notes.length = 0;
  tally.matchedBy = {};
  tally.wouldBe.length = 0;
  tally.settled.length = 0;
}

/** A statement that moves the task past rows without a window, bounded like one (window-transaction.ts). */
function statement<R>(deps: WindowWriterDeps, run: Promise<R>): Promise<R> {
  return statementWithin(deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, run);
}

/** Every transaction of a window goes through here, so none of them can hang the task (window-transaction.ts). */
function transaction<R>(deps: WindowWriterDeps, fn: (tx: Tx) => Promise<R>): Promise<R> {
  return destinationWindow(
    deps.db,
    { deadlineMs: deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, probeMs: deps.destinationProbeMs },
    fn,
  );
}

function perRowWindowSize(deps: WindowWriterDeps): number {
  const size = deps.windowSize ?? WINDOW_SIZE;
  const limit = deps.savepointLimit ?? MAX_SAVEPOINTS_PER_TRANSACTION;
  if (!Number.isInteger(size) || size < 1 || size > limit)
    throw new SavepointLimitError(Math.min(limit, MAX_SAVEPOINTS_PER_TRANSACTION));
  return size;
}

/**
 * Writes rows through the ledger in windows of one savepoint per row. `rows` is everything at the
 * task's current cursor; the first task.processedOffset of them were committed by an earlier
 * attempt and are skipped.
 *
 * Routing this through the batched path (the row writer as the batch, one ledger claim per window)
 * was measured on write_efficiency (test/bench): 0.152 before, 0.146 and 0.217 with it, no change
 * beyond noise, so the per-row writers keep their savepoints; their batch writers are the gain.
 */
export async function writeRows<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  writer: RowWriter<T>,
  options: WriteOptions<T> = {},
): Promise<WriteSummary> {
  const size = perRowWindowSize(deps);
  return walkWindows(deps, rows, options, size, async (start, end, last) =>
    writePerRowWindow(deps, rows, start, end, last, writer, options),
  );
}

/**
 * The batched path: a window is one writeBatch, one multi-row ledger claim (per-row ledger) and the
 * checkpoint, in one transaction. A window whose batch fails for anything but a transient reason
 * (a bad row, a slot already taken) is written again row by row, in per-row windows of at most
 * WINDOW_SIZE rows each with its own checkpoint, so one bad row loses only itself and no
 * transaction ever holds more than MAX_SAVEPOINTS_PER_TRANSACTION savepoints.
 */
export async function writeBatches<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  writer: BatchWriter<T> | ((toWrite: readonly SourceRow<T>[]) => Promise<BatchWriter<T>>),
  options: WriteOptions<T> & { windowSize?: number } = {},
): Promise<WriteSummary> {
  const fallbackSize = perRowWindowSize(deps);
  const size = Math.max(1, options.windowSize ?? BATCH_WINDOW_SIZE);
  // Built before the first window that writes, outside its transaction, for the rows not found
  // held: a page the ledger holds whole never builds it, and a re-run's page with a few rows to
  // write resolves the parents of those few (for the crm). Should a window have to write a row
  // outside them (its slot let go since), it is built again for the whole listing.
  let built: { writer: BatchWriter<T>; covers?: ReadonlySet<string> } | undefined =
    typeof writer === "function" ? undefined : { writer };
  const build = writer as (toWrite: readonly SourceRow<T>[]) => Promise<BatchWriter<T>>;
  const batchWriter = async (known?: ReadonlyMap<string, HeldSlot>) => {
    if (built) return built.writer;
    const toWrite = known?.size ? rows.filter((r) => !known.has(r.sourceId)) : rows;
    built = {
      writer: await build(toWrite),
      ...(toWrite !== rows ? { covers: new Set(toWrite.map((r) => r.sourceId)) } : {}),
    };
    return built.writer;
  };
  const covering = async (toWrite: readonly { sourceId: string }[]) => {
    if (built?.covers && toWrite.some((r) => !built!.covers!.has(r.sourceId)))
      built = { writer: await build(rows) };
    return built!.writer;
  };
  return walkWindows(deps, rows, options, size, async (start, end, last, known) => {
    await batchWriter(known);
    const batched = await writeBatchWindow(deps, rows, start, end, last, covering, options);
    if (batched) return batched;
    const total = emptySummary();
    const { writeRow } = await covering(rows.slice(start, end));
    for (let from = start; from < end; from += fallbackSize) {
      const to = Math.min(from + fallbackSize, end);
      addSummary(total, await writePerRowWindow(deps, rows, from, to, last && to === end, writeRow, options));
    }
    return total;
  });
}

/** Cuts rows into windows from the task's position, and checks for a stop between them. */
async function walkWindows<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  options: WriteOptions<T>,
  size: number,
  writeWindow: (
    start: number,
    end: number,
    last: boolean,
    known?: ReadonlyMap<string, HeldSlot>,
  ) => Promise<WriteSummary>,
): Promise<WriteSummary> {
  const total = emptySummary();
  const { task } = deps;
  let start = Math.min(task.processedOffset, rows.length);

  // Nothing left at this position: still move the cursor on, in a statement of its own.
  if (start >= rows.length) {
    if (options.nextCursor) {
      const next = options.nextCursor;
      await statement(
        deps,
        checkpointWithoutWrites(
          deps.db,
          { id: task.id, claimToken: deps.claimToken },
          { processedOffset: 0, cursor: next, statsDelta: { ...deps.takeSourceCalls?.() } },
        ),
      );
      task.cursor = next;
      task.processedOffset = 0;
      await stopBetweenUnits(deps);
    }
    return total;
  }

  const held = await passHeldPrefix(deps, rows, start, size, options);
  addSummary(total, held.summary);
  if (held.end >= rows.length) {
    if (options.nextCursor) await stopBetweenUnits(deps);
    return total;
  }
  start = held.end;

  while (start < rows.length) {
    const end = windowEnd(rows, start, size, held.known, options);
    const last = end >= rows.length;
    addSummary(total, await writeWindow(start, end, last, held.known));
    start = end;
    if (!last && (await deps.stopRequested())) throw new TaskCancelledError();
  }
  if (options.nextCursor) await stopBetweenUnits(deps);
  return total;
}

/**
 * A task that moved its cursor to its next unit of work (the next page of its list, the next deal)
 * goes on with it in the same attempt: a stop or a shutdown lands here too, not only between the
 * windows of one unit, or a task of many small units would run to its end through a stop.
 */
async function stopBetweenUnits(deps: WindowWriterDeps): Promise<void> {
  if (await deps.stopRequested()) throw new TaskCancelledError();
}

/**
 * Moves the task past the rows from `start` on that the ledger already holds and this pass does
 * not apply again, as far as they run unbroken, with a checkpoint alone, fenced by the claim token
 * like every checkpoint, with those rows counted already here. Nothing of theirs is written, so
 * their windows would hold nothing but that checkpoint. When they may run to the end of the listing
 * (a re-run of an imported tenant, nearly every page) the question and the checkpoint are one
 * statement; otherwise the question (one query for all of them, not one per window), then the
 * checkpoint. Either commits without waiting for the WAL flush (held-page.ts says why that is safe).
 * A run of held rows shorter than a window (and not reaching the end) is left to the windows, which
 * find it held the same way: a checkpoint of its own would cost more than it saves. Row errors end
 * the run of held rows: their notes commit with the checkpoint that moves past them, in a window.
 */
async function passHeldPrefix<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  start: number,
  size: number,
  options: WriteOptions<T>,
): Promise<{ end: number; summary: WriteSummary; known?: ReadonlyMap<string, HeldSlot> }> {
  const summary = emptySummary();
  const none = { end: start, summary };
  if ((deps.ledger ?? "per-row") !== "per-row" || start >= rows.length) return none;
  // Rows applied again, or failing to parse, cannot be passed over: the candidates stop there.
  let candidates = start;
  while (candidates < rows.length) {
    const row = rows[candidates]!;
    if (isRowErrorInfo(row.data) || options.reapply?.(row)) break;
    candidates++;
  }
  const worth = (end: number) => end >= rows.length || end - start >= size;
  if (candidates === start || !worth(candidates)) return none;
  const ids = rows.slice(start, candidates).map((r) => r.sourceId);
  let held: ReadonlyMap<string, HeldSlot>;
  if (candidates >= rows.length) {
    // The rest of the listing may be held whole (a re-run): asked and moved past in one statement.
    const past = await passHeldRest(deps, rows, start, ids, options);
    if (past.moved) return { end: rows.length, summary: past.summary };
    held = past.held;
  } else held = await heldSlots(deps.db, deps.run, deps.task.kind, ids);
  let end = start;
  while (end < candidates && held.has(rows[end]!.sourceId)) end++;
  if (end === start || !worth(end)) return { ...none, known: held };
  summary.attempted = end - start;
  summary.alreadyHere = end - start;
  const position = positionAfter(rows, end, end >= rows.length, options);
  const tally = { summary, written: 0, notes: [], matchedBy: {}, wouldBe: [], settled: [] };
  await traceWindow(deps.task.kind, end - start, summary, () =>
    statement(
      deps,
      checkpointWithoutWrites(
        deps.db,
        { id: deps.task.id, claimToken: deps.claimToken },
        checkpointOf(deps, tally, position),
      ),
    ),
  );
  advance(deps, position);
  return { end, summary, known: held };
}

/**
 * Where the window from `start` ends: after `size` rows it writes. A row the ledger was found to
 * hold (`known`, asked before the windows) costs a window nothing but a look at its slot, so it does
 * not count: a re-run's page with a few rows to write among hundreds held (orphans skipped again)
 * is one window, not one per `size` rows. The window still checks every slot in its transaction;
 * `known` only sizes it.
 */
function windowEnd<T>(
  rows: readonly SourceRow<T>[],
  start: number,
  size: number,
  known: ReadonlyMap<string, HeldSlot> | undefined,
  options: WriteOptions<T>,
): number {
  if (!known || known.size === 0) return Math.min(start + size, rows.length);
  let end = start;
  let writes = 0;
  while (end < rows.length) {
    const row = rows[end]!;
    const passes = known.has(row.sourceId) && !isRowErrorInfo(row.data) && !options.reapply?.(row);
    if (!passes) {
      if (writes === size) break;
      writes++;
    }
    end++;
  }
  return end;
}

/**
 * rows[start, end of the listing) when the ledger may hold all of them: the question and the
 * checkpoint past them in one statement (held-page.ts). Not moved when some row is not held; the
 * answer is then the held map the caller goes on with.
 */
async function passHeldRest<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  start: number,
  ids: readonly string[],
  options: WriteOptions<T>,
): Promise<{ moved: boolean; held: ReadonlyMap<string, HeldSlot>; summary: WriteSummary }> {
  const summary = emptySummary();
  const n = rows.length - start;
  const position = positionAfter(rows, rows.length, true, options);
  const calls = { ...deps.takeSourceCalls?.() };
  const checkpoint = checkpointOf(
    deps,
    {
      summary: { ...summary, attempted: n, alreadyHere: n },
      written: 0,
      notes: [],
      matchedBy: {},
      wouldBe: [],
      settled: [],
    },
    position,
    calls,
  );
  const past = await traceWindow(deps.task.kind, n, summary, async () => {
    const answer = await statement(
      deps,
      checkpointPastHeldRows(
        deps.db,
        deps.run,
        deps.task.kind,
        ids,
        { id: deps.task.id, claimToken: deps.claimToken },
        checkpoint,
      ),
    );
    // Counted (and traced) only as a window that committed.
    if (answer.moved) Object.assign(summary, checkpointSummary(n));
    return answer;
  });
  if (!past.moved) {
    deps.restoreSourceCalls?.(calls);
    return { moved: false, held: past.held, summary: emptySummary() };
  }
  advance(deps, position);
  return { moved: true, held: past.held, summary };
}

function checkpointSummary(n: number): WriteSummary {
  return { ...emptySummary(), attempted: n, alreadyHere: n };
}

/** Where the task stands once rows[0, end) are committed: a keyset cursor, the next unit, or an offset. */
function positionAfter<T>(
  rows: readonly SourceRow<T>[],
  end: number,
  last: boolean,
  options: WriteOptions<T>,
): WindowPosition {
  // The listing's last window records every id of it (verification's account of what was listed).
  const listed = last ? { listed: rows.map((r) => r.sourceId) } : {};
  if (last && options.nextCursor) return { processedOffset: 0, cursor: options.nextCursor, ...listed };
  if (options.cursorAfter)
    return { processedOffset: 0, cursor: options.cursorAfter(rows[end - 1]!), ...listed };
  if (options.positionAfter && end < rows.length) return { ...options.positionAfter(end), ...listed };
  return { processedOffset: end, ...listed };
}

type WindowPosition = Pick<Checkpoint, "processedOffset" | "cursor" | "listed">;

/** Notes and checkpoint of a window, in its transaction: they commit with its rows or not at all. */
async function commitWindow(
  tx: Tx,
  deps: WindowWriterDeps,
  tally: WindowTally,
  position: WindowPosition,
): Promise<void> {
  // Before this window's own notes go in: only notes of earlier windows are settled.
  await settleNotes(tx, deps.run.id, deps.task.kind, tally.settled);
  await appendNotes(tx, deps.run.id, deps.task.id, tally.notes, deps.notesCap);
  if (deps.run.dryRun) await recordWouldBeRows(tx, deps.run.id, tally.wouldBe);
  await writeCheckpoint(tx, deps.task.id, deps.claimToken, checkpointOf(deps, tally, position));
}

/**
 * The checkpoint of a window: its position and its counts; `calls` the source calls it carries
 * (taken from the task's counter when not given).
 */
function checkpointOf(
  deps: WindowWriterDeps,
  tally: WindowTally,
  position: WindowPosition,
  calls: Record<string, number> = { ...deps.takeSourceCalls?.() },
): Checkpoint {
  const s = tally.summary;
  // Only a ledgered source's listing is verified against it; a ledgerless one is compared per slot.
  const { listed, ...at } = position;
  return {
    ...at,
    ...(listed && (deps.ledger ?? "per-row") === "per-row" ? { listed } : {}),
    statsDelta: {
      created: s.created,
      matched: s.matched,
      already_here: s.alreadyHere,
      skipped: s.skipped,
      failed: s.failed,
      ...Object.fromEntries(
        Object.entries(tally.matchedBy).map(([key, n]) => [
          key.startsWith(MISSING_PARENT) ? key : `${MATCHED_BY}${key}`,
          n,
        ]),
      ),
      ...calls,
    },
    rowsRead: s.attempted,
    rowsWritten: tally.written,
  };
}

/** After the commit: the live task view moves to the checkpoint just written. */
function advance(deps: WindowWriterDeps, position: WindowPosition): void {
  if (position.cursor) deps.task.cursor = position.cursor;
  deps.task.processedOffset = position.processedOffset;
}

function noteRowError(tally: WindowTally, kind: string, sourceId: string, reason: string): void {
  tally.summary.failed++;
  tally.notes.push({ level: "error", kind, subjectId: sourceId, reason });
}

/** Counts a written row's result; a skipped row is noted with its reason. */
function tallyResult(tally: WindowTally, kind: string, sourceId: string, result: RowResult): void {
  switch (result.action) {
    case "created":
      tally.summary.created++;
      tally.written++;
      tally.wouldBe.push({ kind, sourceId, matchKey: result.matchKey ?? null });
      break;
    case "matched":
      tally.summary.matched++;
      tally.written++;
      if (result.matchRule) tally.matchedBy[result.matchRule] = (tally.matchedBy[result.matchRule] ?? 0) + 1;
      tally.wouldBe.push({ kind, sourceId, matchKey: null });
      break;
    case "upserted":
      // Without a ledger a rewrite is the harmless overwrite of what an earlier attempt wrote.
      if (result.replaced) tally.summary.alreadyHere++;
      else tally.summary.created++;
      tally.written++;
      break;
    case "updated":
      // A catch-up pass rewrote a record an earlier pass imported: already here, and written.
      tally.summary.alreadyHere++;
      tally.written++;
      if (result.note) tally.notes.push({ level: "info", kind, subjectId: sourceId, reason: result.note });
      break;
    case "skipped":
      tally.summary.skipped++;
      if (result.missing)
        for (const parent of result.missing.length > 0 ? result.missing : [NO_PARENT])
          tally.matchedBy[`${MISSING_PARENT}${parent}`] =
            (tally.matchedBy[`${MISSING_PARENT}${parent}`] ?? 0) + 1;
      tally.notes.push({ level: "warn", kind, subjectId: sourceId, reason: result.reason });
      break;
  }
}

/** A ledger mode and a result that contradict each other are a provider bug, not a row's problem. */
function checkResultFitsLedger(mode: LedgerMode, result: RowResult): void {
  if (mode === "none" && result.action !== "upserted" && result.action !== "skipped")
    throw new PermanentError(`a source without a ledger must upsert; its writer returned "${result.action}"`);
  if (mode === "per-row" && result.action === "upserted")
    throw new PermanentError(
      `"upserted" needs ledger mode "none"; this source keeps a ledger row per source row`,
    );
}

function claimOf(kind: string, sourceId: string, result: RowResult): LedgerSlotClaim {
  if (result.action === "skipped")
    return { kind, sourceId, action: "skipped", reason: result.reason, recordType: null, recordId: null };
  if (result.action === "upserted" || result.action === "updated")
    throw new PermanentError(`an ${result.action} row claims no ledger slot`);
  return {
    kind,
    sourceId,
    action: result.action,
    recordType: result.recordType,
    recordId: result.recordId,
    pendingRefs: result.pendingRefs ?? null,
    reason: null,
  };
}

/**
 * What to do with each row of rows[start, end) that the ledger already holds, asked in one query
 * inside the window's transaction, before anything is written:
 * - a held row this pass does not apply again is written as nothing and counted already here. A
 *   held slot is created or matched, and those are exclusive: writing the row could only end in a
 *   lost claim and an undone write, which is what a re-run of an imported tenant did for every row,
 *   inserting, rolling back and rewriting each window row by row with savepoints, and advancing
 *   the product's id sequences by one per row while creating nothing. The outcome is the same
 *   (already here, the row accounted once), without the write;
 * - a held row the pass applies again (WriteOptions.reapply, the catch-up) goes to the writer with
 *   its slot, so it can update a record Drover created in place and only fill what is empty on one
 *   it matched (invariant 8);
 * - a skipped slot is not held: the row is written and its claim takes the placeholder over.
 * The checkpoint that moves past a held row commits in the transaction that found it held. A slot
 * claimed by another writer after this query is still caught by the claim, as before: the claim
 * loses and only that row's write is undone. Row errors are not asked about: they fail as noted.
 */
async function heldInWindow<T>(
  tx: Tx,
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  start: number,
  end: number,
): Promise<Map<string, HeldSlot>> {
  if ((deps.ledger ?? "per-row") !== "per-row") return new Map();
  const ids: string[] = [];
  for (let i = start; i < end; i++) if (!isRowErrorInfo(rows[i]!.data)) ids.push(rows[i]!.sourceId);
  return heldSlots(tx, deps.run, deps.task.kind, ids);
}

/** A dry run's rows of rows[start, end) that an earlier window of it would have written. */
async function wouldBeInWindow<T>(
  tx: Tx,
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  start: number,
  end: number,
): Promise<Set<string>> {
  if (!deps.run.dryRun) return new Set();
  return wouldBeRows(
    tx,
    deps.run.id,
    deps.task.kind,
    rows.slice(start, end).map((r) => r.sourceId),
  );
}

/** The slot to hand the writer for a held row this pass applies again; "skip" when it writes nothing. */
function heldFor<T>(
  held: ReadonlyMap<string, HeldSlot>,
  row: SourceRow<T>,
  options: WriteOptions<T>,
  wouldBe: ReadonlySet<string>,
): HeldSlot | undefined | "skip" {
  // A dry run's row an earlier window of it would have written: already here, as in a real run.
  if (wouldBe.has(row.sourceId)) return "skip";
  const slot = held.get(row.sourceId);
  if (!slot) return undefined;
  return options.reapply?.(row) ? slot : "skip";
}

/**
 * rows[start, end) in one transaction, a savepoint per row: a row error or a lost ledger slot undoes
 * only that row. A deadlock, serialization failure or lost connection takes the whole transaction,
 * which no savepoint contains: the window goes and the task retries from its checkpoint.
 */
async function writePerRowWindow<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  start: number,
  end: number,
  last: boolean,
  writer: RowWriter<T>,
  options: WriteOptions<T>,
): Promise<WriteSummary> {
  const { run, task } = deps;
  const mode = deps.ledger ?? "per-row";
  const tally = newTally();
  const position = positionAfter(rows, end, last, options);
  await traceWindow(task.kind, end - start, tally.summary, () =>
    transaction(deps, async (outer) => {
      const savepoints = new SavepointBudget(deps.savepointLimit ?? MAX_SAVEPOINTS_PER_TRANSACTION);
      if (deps.run.dryRun) savepoints.take();
      await rolledBackInDryRun(outer, deps.run, async (tx) => {
        const held = await heldInWindow(tx, deps, rows, start, end);
        const wouldBe = await wouldBeInWindow(tx, deps, rows, start, end);
        for (let i = start; i < end; i++) {
          const row = rows[i]!;
          tally.summary.attempted++;
          if (isRowErrorInfo(row.data)) {
            noteRowError(tally, task.kind, row.sourceId, row.data.rowError);
            continue;
          }
          const slot = heldFor(held, row, options, wouldBe);
          if (slot === "skip") {
            tally.summary.alreadyHere++;
            continue;
          }
          const data = row.data as T;
          savepoints.take();
          try {
            const outcome = await tx.transaction(async (sp) => {
              const result = await writer(sp, data, row.sourceId, slot);
              checkResultFitsLedger(mode, result);
              // Without a ledger, or an in-place update of the record the ledger already points to:
              // there is no slot to claim.
              if (mode === "none" || result.action === "updated") return result;
              const won = await claimLedgerSlot(sp, {
                tenantId: run.tenantId,
                source: run.source,
                sourceAccount: run.sourceAccount,
                ...claimOf(task.kind, row.sourceId, result),
                runId: run.id,
                taskId: task.id,
              });
              if (!won) throw new AlreadyHere();
              return result;
            });
            tallyResult(tally, task.kind, row.sourceId, outcome);
            if (options.settlesNotes) tally.settled.push(row.sourceId);
          } catch (err) {
            if (err instanceof AlreadyHere) {
              tally.summary.alreadyHere++;
              continue;
            }
            // A schema that no longer takes the rows fails none of them: the run parks, and says so once.
            const fault = destinationSchemaFault(err);
            if (fault) {
              const probeMs = deps.destinationProbeMs ?? DESTINATION_PROBE_MS;
              throw new DestinationSchemaError(fault, new Date(Date.now() + probeMs), { cause: err });
            }
            if (classifyError(err) !== "row") throw err;
            noteRowError(tally, task.kind, row.sourceId, describeError(err));
          }
        }
      });
      await commitWindow(outer, deps, tally, position);
    }),
  );
  advance(deps, position);
  return tally.summary;
}

/**
 * rows[start, end) as one batch: writeBatch, the window's ledger claim in one statement, the
 * checkpoint. Returns undefined when the batch failed in a way a row-by-row rewrite can contain
 * (the transaction is rolled back first); rethrows transient failures and a lost task claim.
 */
async function writeBatchWindow<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  start: number,
  end: number,
  last: boolean,
  writerFor: (toWrite: readonly WritableRow<T>[]) => Promise<BatchWriter<T>>,
  options: WriteOptions<T>,
): Promise<WriteSummary | undefined> {
  const { run, task } = deps;
  const mode = deps.ledger ?? "per-row";
  const position = positionAfter(rows, end, last, options);
  const tally = newTally();
  try {
    await traceWindow(task.kind, end - start, tally.summary, () =>
      transaction(deps, async (outer) => {
        resetTally(tally);
        await rolledBackInDryRun(outer, deps.run, async (tx) => {
          const held = await heldInWindow(tx, deps, rows, start, end);
          const wouldBe = await wouldBeInWindow(tx, deps, rows, start, end);
          const writable: WritableRow<T>[] = [];
          for (let i = start; i < end; i++) {
            const row = rows[i]!;
            tally.summary.attempted++;
            if (isRowErrorInfo(row.data)) {
              noteRowError(tally, task.kind, row.sourceId, row.data.rowError);
              continue;
            }
            const slot = heldFor(held, row, options, wouldBe);
            if (slot === "skip") tally.summary.alreadyHere++;
            else
              writable.push({ sourceId: row.sourceId, data: row.data as T, ...(slot ? { held: slot } : {}) });
          }
          const results =
            writable.length > 0 ? await (await writerFor(writable)).writeBatch(tx, writable) : [];
          if (results.length !== writable.length)
            throw new PermanentError(
              `writeBatch returned ${results.length} results for ${writable.length} rows`,
            );
          for (const r of results) checkResultFitsLedger(mode, r);
          // An in-place update keeps the slot the ledger already has; every other result claims one.
          const claims =
            mode === "per-row"
              ? writable.flatMap((w, i) =>
                  results[i]!.action === "updated" ? [] : [claimOf(task.kind, w.sourceId, results[i]!)],
                )
              : [];
          if (claims.length > 0) {
            const won = await claimLedgerSlots(
              tx,
              {
                tenantId: run.tenantId,
                source: run.source,
                sourceAccount: run.sourceAccount,
                runId: run.id,
                taskId: task.id,
              },
              claims,
            );
            if (won.size < claims.length) throw new BatchLostSlots(claims.length - won.size);
          }
          for (const [i, w] of writable.entries()) {
            tallyResult(tally, task.kind, w.sourceId, results[i]!);
            if (options.settlesNotes) tally.settled.push(w.sourceId);
          }
        });
        await commitWindow(outer, deps, tally, position);
      }),
    );
  } catch (err) {
    if (err instanceof LostClaimError || err instanceof SavepointLimitError) throw err;
    if (!(err instanceof BatchLostSlots) && classifyError(err) === "transient") throw err;
    return undefined;
  }
  advance(deps, position);
  return tally.summary;
}
