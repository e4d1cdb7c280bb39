import type { Tx } from "@drover/db";
import type { SourceRow, WriteOptions } from "@drover/provider-sdk";
import { MATCHED_BY, MISSING_PARENT, recordWouldBeRows } from "./dry-run.js";
import { appendNotes, settleNotes } from "./notes.js";
import { type Checkpoint, writeCheckpoint } from "./task-transitions.js";
import type { WindowWriterDeps } from "./window-deps.js";
import type { WindowTally } from "./window-tally.js";

/**
 * A window's checkpoint: where the task stands once the window's rows committed, the counts it
 * adds to the task's stats, and the notes that commit with it. Never ahead of what committed: it is
 * written in the window's own transaction.
 */

/** Where the task stands once rows[0, end) are committed: a keyset cursor, the next unit, or an offset. */
export function positionAfter<T>(
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

export type WindowPosition = Pick<Checkpoint, "processedOffset" | "cursor" | "listed">;

/** Notes and checkpoint of a window, in its transaction: they commit with its rows or not at all. */
export async function commitWindow(
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
export function checkpointOf(
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
export function advance(deps: WindowWriterDeps, position: WindowPosition): void {
  if (position.cursor) deps.task.cursor = position.cursor;
  deps.task.processedOffset = position.processedOffset;
}
