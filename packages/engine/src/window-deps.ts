import type { Db, Tx } from "@drover/db";
import type { LedgerMode, RunInfo, TaskInfo } from "@drover/provider-sdk";
import { destinationWindow, statementWithin, WINDOW_DEADLINE_MS } from "./window-transaction.js";

/**
 * What a window writer is given (the run, the task under its claim, the limits) and the two ways
 * its work reaches the database: a window's transaction and a lone checkpoint statement, both
 * bounded by the window's deadline (window-transaction.ts).
 */

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

/** A statement that moves the task past rows without a window, bounded like one (window-transaction.ts). */
export function statement<R>(deps: WindowWriterDeps, run: Promise<R>): Promise<R> {
  return statementWithin(deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, run);
}

/** Every transaction of a window goes through here, so none of them can hang the task (window-transaction.ts). */
export function transaction<R>(deps: WindowWriterDeps, fn: (tx: Tx) => Promise<R>): Promise<R> {
  return destinationWindow(
    deps.db,
    { deadlineMs: deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, probeMs: deps.destinationProbeMs },
    fn,
  );
}
