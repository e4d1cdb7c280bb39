import type { LedgerSlotClaim } from "@drover/ledger";
import { type LedgerMode, PermanentError, type RowResult, type WriteSummary } from "@drover/provider-sdk";
import { MISSING_PARENT, NO_PARENT, type WouldBeRow } from "./dry-run.js";
import type { NoteInput } from "./notes.js";

/**
 * What one window counts while it writes (created, matched, already here, skipped, failed; notes;
 * a dry run's would-be rows) and the ledger slot each written row claims. Kept only when the window
 * commits.
 */

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
export interface WindowTally {
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

export function newTally(): WindowTally {
  return { summary: emptySummary(), written: 0, notes: [], matchedBy: {}, wouldBe: [], settled: [] };
}

/** In place, so the window's span and metrics (traceWindow) read the counts of the attempt that committed. */
export function resetTally(tally: WindowTally): void {
  Object.assign(tally.summary, emptySummary());
  tally.written = 0;
  tally.notes.length = 0;
  tally.matchedBy = {};
  tally.wouldBe.length = 0;
  tally.settled.length = 0;
}

export function checkpointSummary(n: number): WriteSummary {
  return { ...emptySummary(), attempted: n, alreadyHere: n };
}

export function noteRowError(tally: WindowTally, kind: string, sourceId: string, reason: string): void {
  tally.summary.failed++;
  tally.notes.push({ level: "error", kind, subjectId: sourceId, reason });
}

/** Counts a written row's result; a skipped row is noted with its reason. */
export function tallyResult(tally: WindowTally, kind: string, sourceId: string, result: RowResult): void {
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
export function checkResultFitsLedger(mode: LedgerMode, result: RowResult): void {
  if (mode === "none" && result.action !== "upserted" && result.action !== "skipped")
    throw new PermanentError(`a source without a ledger must upsert; its writer returned "${result.action}"`);
  if (mode === "per-row" && result.action === "upserted")
    throw new PermanentError(
      `"upserted" needs ledger mode "none"; this source keeps a ledger row per source row`,
    );
}

export function claimOf(kind: string, sourceId: string, result: RowResult): LedgerSlotClaim {
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
