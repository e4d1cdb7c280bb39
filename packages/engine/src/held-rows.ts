import type { Tx } from "@drover/db";
import { heldSlots } from "@drover/ledger";
import {
  type HeldSlot,
  isRowErrorInfo,
  type SourceRow,
  type WriteOptions,
  type WriteSummary,
} from "@drover/provider-sdk";
import { wouldBeRows } from "./dry-run.js";
import { checkpointPastHeldRows, checkpointWithoutWrites } from "./held-page.js";
import { traceWindow } from "./instrumentation.js";
import { advance, checkpointOf, positionAfter } from "./window-checkpoint.js";
import { statement, type WindowWriterDeps } from "./window-deps.js";
import { checkpointSummary, emptySummary } from "./window-tally.js";

/**
 * Rows the ledger already holds: passed over with a checkpoint alone where they run unbroken (a
 * re-run of an imported tenant), and inside a window handed to the writer only when the pass
 * applies them again (the catch-up).
 */

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
export async function passHeldPrefix<T>(
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
export function windowEnd<T>(
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
export async function passHeldRest<T>(
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
export async function heldInWindow<T>(
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
export async function wouldBeInWindow<T>(
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
export function heldFor<T>(
  held: ReadonlyMap<string, HeldSlot>,
  row: SourceRow<T>,
  options: WriteOptions<T>,
  wouldBe: ReadonlySet<string>,
): HeldSlot | undefined | "skip" {
  // Asked of every row of every window: an empty set or map (no ledger, not a dry run) is not
  // looked into, which spares hashing each new key (~0.14 ms per 1,000 rows of a streamed copy).
  // A dry run's row an earlier window of it would have written: already here, as in a real run.
  if (wouldBe.size > 0 && wouldBe.has(row.sourceId)) return "skip";
  if (held.size === 0) return undefined;
  const slot = held.get(row.sourceId);
  if (!slot) return undefined;
  return options.reapply?.(row) ? slot : "skip";
}
