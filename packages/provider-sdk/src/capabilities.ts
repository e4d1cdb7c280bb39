import type { Tx } from "@drover/db/connection";

/**
 * What a source may ask of the engine's own records, and how it may add to them. A source never
 * holds a handle on the engine's tables (a Temporal activity never sees Temporal's persistence
 * either): the engine implements these, scoped to the run, and hands them in through the contexts.
 * Reading and writing the product's own tables stays the source's job.
 */

/** A run note about what the source did not say and what the run assumed instead. */
export interface SourceNote {
  level: "info" | "warn";
  kind: string;
  subjectId: string | null;
  reason: string;
}

/**
 * The source ids the ledger maps to local record ids, for created or matched rows: one query for a
 * whole page, whatever the number of kinds.
 */
export interface RecordIds {
  get(kind: string, sourceId: string | null | undefined): number | undefined;
}

/**
 * The ledger, read only, for the run's tenant, source and source account: created or matched rows
 * (a skipped placeholder holds no record).
 */
export interface LedgerLookup {
  /**
   * The source ids of `kind` the ledger holds; in a dry run also those its own earlier windows
   * would have written (they were rolled back, so the ledger alone would not say).
   */
  heldSourceIds(kind: string): Promise<string[]>;
  /** How many rows of `kind` the ledger holds. */
  heldCount(kind: string): Promise<number>;
  /** Source id → local record id for the given kinds' source ids. */
  recordIds(wanted: Readonly<Record<string, readonly string[]>>): Promise<RecordIds>;
  /** Local record id (as text) → the source id of `kind` that points at it, for those of `recordIds` held. */
  sourceIdsOfRecords(kind: string, recordIds: readonly string[]): Promise<Map<string, string>>;
  /**
   * The records of `recordType` among `recordIds` that some source row was matched to (persons
   * sharing an email: the first created the contact, the others matched it), as text ids.
   */
  matchedRecordIds(recordType: string, recordIds: readonly string[]): Promise<Set<string>>;
  /**
   * This run's own ledger rows of `kind`: how many, how many of them created a record, and the
   * record ids of up to `limit` of those created (to sample what the run wrote).
   */
  runRows(
    kind: string,
    limit: number,
  ): Promise<{ rows: number; created: number; createdRecordIds: number[] }>;
}

/** What a run decided once for all its tasks (TaskContext.runFact). */
export interface RunFacts {
  /** The fact, or undefined while no task has settled it. */
  runFact(key: string): Promise<unknown>;
  /** Records the fact unless another task did first; returns the value that stands. */
  settleRunFact(key: string, value: unknown): Promise<unknown>;
}

/**
 * What a dry run would have written before the current window: its windows are rolled back, so a
 * later row finds a record an earlier one would have created only here, by its match key.
 */
export interface DryRunMatches {
  /** The keys among `keys` that an earlier window of the dry run would have written a `kind` row with. */
  matchKeys(tx: Tx, kind: string, keys: readonly string[]): Promise<Set<string>>;
}

/** What a phase's seeding may read of the run besides the product (SeedContext). */
export interface SeedCapabilities {
  ledger: LedgerLookup;
  /** The cursors of this run's tasks of `kind` that carry `key`, oldest first (TaskContext.keptCursors). */
  keptCursors(kind: string, key: string): Promise<Record<string, unknown>[]>;
  /** The source ids of `kind` this run noted as failed (an error note naming the row). */
  failedSourceIds(kind: string): Promise<string[]>;
  /** A run note, unless the run already has the same one: a phase seeded again says it once. */
  noteOnce(note: SourceNote): Promise<void>;
}

/** What verification may read of the run besides the product (VerifyContext). */
export interface VerifyCapabilities {
  ledger: LedgerLookup;
  /**
   * How many distinct source ids this run's tasks of `kind` listed (the ids each task kept of the
   * pages it read), among the tasks whose cursor contains `cursorMatch` (e.g. `{ list: 1 }`).
   */
  listedCount(kind: string, cursorMatch: Record<string, unknown>): Promise<number>;
}
