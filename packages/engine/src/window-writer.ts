import { claimLedgerSlot, claimLedgerSlots } from "@drover/ledger";
import {
  type BatchWriter,
  classifyError,
  type HeldSlot,
  isRowErrorInfo,
  PermanentError,
  type RowWriter,
  type SourceRow,
  type WritableRow,
  type WriteOptions,
  type WriteSummary,
} from "@drover/provider-sdk";
import { DestinationSchemaError, describeError, destinationSchemaFault } from "@drover/provider-sdk/engine";
import { rolledBackInDryRun } from "./dry-run.js";
import { checkpointWithoutWrites } from "./held-page.js";
import { heldFor, heldInWindow, passHeldPrefix, windowEnd, wouldBeInWindow } from "./held-rows.js";
import { traceWindow } from "./instrumentation.js";
import { LostClaimError } from "./task-transitions.js";
import { advance, commitWindow, positionAfter } from "./window-checkpoint.js";
import { statement, transaction, type WindowWriterDeps } from "./window-deps.js";
import {
  addSummary,
  checkResultFitsLedger,
  claimOf,
  emptySummary,
  newTally,
  noteRowError,
  resetTally,
  tallyResult,
} from "./window-tally.js";
import { DESTINATION_PROBE_MS } from "./window-transaction.js";

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
              writable.push(
                slot
                  ? { sourceId: row.sourceId, data: row.data as T, held: slot }
                  : { sourceId: row.sourceId, data: row.data as T },
              );
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
