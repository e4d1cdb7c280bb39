import type { Db } from "@drover/db";
import { claimLedgerSlot } from "@drover/ledger";
import {
  classifyError,
  describeError,
  isRowErrorInfo,
  type RowWriter,
  type RunInfo,
  type SourceRow,
  type TaskInfo,
  type WriteOptions,
  type WriteSummary,
} from "@drover/provider-sdk";
import { writeCheckpoint } from "./checkpoint.js";
import { appendNotes, type NoteInput } from "./notes.js";

/**
 * 25 rows per transaction. Each row gets a savepoint, and Postgres caches only 64 subtransaction
 * ids per transaction before every snapshot overflows to a slow path; 25 keeps far below that
 * while amortising the commit.
 */
export const WINDOW_SIZE = 25;

/** Thrown inside a row's savepoint to undo our own write when the ledger slot is already taken. */
class AlreadyHere extends Error {}

/** A stop was requested; the window in hand has committed. */
export class TaskCancelledError extends Error {
  constructor() {
    super("the run is stopping");
    this.name = "TaskCancelledError";
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
  windowSize?: number;
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

/**
 * Writes rows through the ledger in windows. `rows` is everything at the task's current cursor;
 * the first task.processedOffset of them were committed by an earlier attempt and are skipped.
 */
export async function writeRows<T>(
  deps: WindowWriterDeps,
  rows: readonly SourceRow<T>[],
  writer: RowWriter<T>,
  options: WriteOptions = {},
): Promise<WriteSummary> {
  const size = deps.windowSize ?? WINDOW_SIZE;
  const total = emptySummary();
  const { run, task } = deps;
  let start = Math.min(task.processedOffset, rows.length);

  // Nothing left at this position: still move the cursor on, in a transaction of its own.
  if (start >= rows.length) {
    if (options.nextCursor) {
      const next = options.nextCursor;
      await deps.db.transaction((tx) =>
        writeCheckpoint(tx, task.id, deps.claimToken, { processedOffset: 0, cursor: next, statsDelta: {} }),
      );
      task.cursor = next;
      task.processedOffset = 0;
    }
    return total;
  }

  while (start < rows.length) {
    const window = rows.slice(start, start + size);
    const end = start + window.length;
    const last = end >= rows.length;
    const summary = emptySummary();
    const notes: NoteInput[] = [];

    await deps.db.transaction(async (tx) => {
      for (const row of window) {
        summary.attempted++;
        if (isRowErrorInfo(row.data)) {
          summary.failed++;
          notes.push({ level: "error", kind: task.kind, subjectId: row.sourceId, reason: row.data.rowError });
          continue;
        }
        const data = row.data as T;
        try {
          const outcome = await tx.transaction(async (sp) => {
            const result = await writer(sp, data, row.sourceId);
            // An in-place update of the record the ledger already points to: the slot is not ours to claim.
            if (result.action === "updated") return result;
            const won = await claimLedgerSlot(sp, {
              tenantId: run.tenantId,
              source: run.source,
              sourceAccount: run.sourceAccount,
              kind: task.kind,
              sourceId: row.sourceId,
              action: result.action,
              recordType: result.action === "skipped" ? null : result.recordType,
              recordId: result.action === "skipped" ? null : result.recordId,
              reason: result.action === "skipped" ? result.reason : null,
              pendingRefs: result.action === "skipped" ? null : (result.pendingRefs ?? null),
              runId: run.id,
              taskId: task.id,
            });
            if (!won) throw new AlreadyHere();
            return result;
          });
          if (outcome.action === "created") summary.created++;
          else if (outcome.action === "matched") summary.matched++;
          else if (outcome.action === "updated") summary.alreadyHere++;
          else if (outcome.action === "skipped") {
            summary.skipped++;
            notes.push({ level: "warn", kind: task.kind, subjectId: row.sourceId, reason: outcome.reason });
          }
        } catch (err) {
          if (err instanceof AlreadyHere) {
            summary.alreadyHere++;
            continue;
          }
          // A deadlock, a serialization failure or a lost connection takes the whole transaction
          // with it; no savepoint contains that. Let the window go and the task retry from its checkpoint.
          if (classifyError(err) !== "row") throw err;
          summary.failed++;
          notes.push({
            level: "error",
            kind: task.kind,
            subjectId: row.sourceId,
            reason: describeError(err),
          });
        }
      }
      await appendNotes(tx, run.id, task.id, notes, deps.notesCap);
      const moveOn = last && options.nextCursor;
      await writeCheckpoint(tx, task.id, deps.claimToken, {
        processedOffset: moveOn ? 0 : end,
        ...(moveOn ? { cursor: options.nextCursor } : {}),
        statsDelta: {
          created: summary.created,
          matched: summary.matched,
          already_here: summary.alreadyHere,
          skipped: summary.skipped,
          failed: summary.failed,
        },
      });
    });

    if (last && options.nextCursor) {
      task.cursor = options.nextCursor;
      task.processedOffset = 0;
    } else {
      task.processedOffset = end;
    }
    addSummary(total, summary);
    start = end;
    if (!last && (await deps.stopRequested())) throw new TaskCancelledError();
  }
  return total;
}
