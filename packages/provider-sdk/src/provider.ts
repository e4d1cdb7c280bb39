import type { Queryable, Tx } from "@drover/db/connection";
import type { BudgetPacer } from "./budget-pacer.js";
import type { DryRunMatches, LedgerLookup, RunFacts, SeedCapabilities, SourceNote } from "./capabilities.js";
import type { RunInfo } from "./run-info.js";
import type { ProviderVerifier } from "./verifier.js";

export type { RunInfo } from "./run-info.js";

/** A unit of work to create. Seeding the same seedKey twice in one run is a no-op. */
export interface TaskSeed {
  kind: string;
  seedKey: string;
  cursor: Record<string, unknown>;
}

export interface SeedContext extends SeedCapabilities {
  run: RunInfo;
  phase: number;
  /** The kinds of the phase being seeded (already filtered to the run's kinds). */
  kinds: readonly string[];
  /**
   * The barrier's transaction: seeding commits together with the barrier moving, or not at all.
   * Read the product's tables here (the destination's shape); never the network. What the run
   * itself holds (ledger, notes, tasks' cursors) is asked through the capabilities, which run in
   * this same transaction.
   */
  tx: Tx;
  /**
   * Set when a follow run seeds its closing phase again for another pass: the provider asks for
   * what changed since `since` (the previous pass's start) instead of since the run's start, under
   * task keys of its own (`index`), so no pass's tasks collide with another's.
   */
  pass?: { index: number; since: string };
}

export interface TaskInfo {
  id: number;
  kind: string;
  phase: number;
  cursor: Record<string, unknown>;
  processedOffset: number;
  attempts: number;
}

/** One source row on its way to the destination. */
export interface SourceRow<T = unknown> {
  sourceId: string;
  /** The parsed row, or a RowError saying why it could not be parsed. */
  data: T | RowErrorInfo;
}

export interface RowErrorInfo {
  readonly rowError: string;
}

export function isRowErrorInfo(value: unknown): value is RowErrorInfo {
  return typeof value === "object" && value !== null && "rowError" in value;
}

export type RowResult =
  | {
      action: "created" | "matched";
      recordType: string;
      recordId: number;
      /** Source ids of same-phase references to resolve at the barrier, keyed by kind. */
      pendingRefs?: Record<string, string>;
      /**
       * The key a later row of the same kind is matched on (a person's lower-cased email). Only a
       * dry run keeps it (ParentMap.dryRun): its windows are rolled back, so a later row can
       * find the record this one would have been only by this key.
       */
      matchKey?: string;
      /** How the row was matched (e.g. "email"), for a dry run's report. */
      matchRule?: string;
    }
  | {
      action: "skipped";
      reason: string;
      /**
       * The parent kinds the row refers to that are not written (none: it refers to no parent at
       * all), counted per kind in the task's stats (`missing_parent:<kind>`) for a dry run's report.
       */
      missing?: string[];
    }
  /**
   * Only without a ledger (ledger mode `none`): the row was upserted into a destination keyed by its
   * source id; `replaced` when a row with that key was already there (an earlier attempt wrote it).
   */
  | { action: "upserted"; replaced: boolean }
  /**
   * The ledger already points at recordId (an earlier pass created or matched it) and the writer
   * changed that record in place, e.g. a catch-up pass applying what the customer edited mid-run.
   * No ledger claim is made: the slot stays as it was. Counted as already here. `note` says what
   * was done to a record Drover does not own (what it filled, what it left as it was); it becomes
   * an info note on the row.
   */
  | { action: "updated"; recordType: string; recordId: number; note?: string };

/**
 * The ledger's created or matched slot of a row a pass applies again (WriteOptions.reapply): the
 * record to change in place. `created`: Drover's own record, updated as the source says. `matched`:
 * someone else's (invariant 8): only what is empty there may be filled.
 */
export interface HeldSlot {
  action: "created" | "matched";
  recordType: string | null;
  recordId: number;
}

/**
 * How a provider accounts for source rows.
 * - `per-row`: one ledger row per source row, claimed in the transaction that writes it. Invariants
 *   1 and 2 hold through the ledger's write-once slot.
 * - `none`: for tables of billions of rows, where a ledger would double every write. The writer
 *   upserts into a destination keyed by the source id (a rewrite is harmless, a duplicate
 *   impossible), failures are noted by source id, and each task keeps its rows read and written.
 */
export type LedgerMode = "per-row" | "none";

/** A row ready to write: row errors were noted and left out before the batch. */
export interface WritableRow<T> {
  sourceId: string;
  data: T;
  /** Set only for a row the pass applies again (WriteOptions.reapply): the slot the ledger holds. */
  held?: HeldSlot;
}

/**
 * Writes a whole window in a few statements (a multi-row insert or upsert), with `writeRow` for one
 * row at a time when the window's batch failed. Rows of one window must not depend on each other.
 */
export interface BatchWriter<T> {
  /**
   * Writes every row, inside the window's transaction and without a savepoint per row (one of its
   * own at most, e.g. to try a faster statement first and take it back), and returns one
   * result per row, in order. Any error undoes the whole window, which is then written again row
   * by row through writeRow so that a bad row loses only itself.
   */
  writeBatch(tx: Tx, rows: readonly WritableRow<T>[]): Promise<RowResult[]>;
  /** Writes one row inside its own savepoint; the same contract as a RowWriter. */
  writeRow: RowWriter<T>;
}

/**
 * Writes one row inside its savepoint. Throw RowError (or let a constraint fail) to lose only this
 * row; any other failure aborts the window and retries the task. `held` as in WritableRow.
 */
export type RowWriter<T> = (tx: Tx, row: T, sourceId: string, held?: HeldSlot) => Promise<RowResult>;

export interface WriteOptions<T = unknown> {
  /**
   * Where the task stands once every row given has been committed. Written in the last window's
   * transaction so a retry starts after these rows, e.g. the next deal of a mail task.
   */
  nextCursor?: Record<string, unknown>;
  /**
   * For keyset walks: the cursor once every row up to and including `row` is committed (e.g. its
   * `last_id`). Written with each window's checkpoint, with processedOffset left at 0, so a retry
   * or a resume reads on exactly after the last committed window.
   */
  cursorAfter?(row: SourceRow<T>): Record<string, unknown>;
  /**
   * For rows that span several units of the task (a mail window holding the messages of several
   * deals): where the task stands once rows[0, end) are committed, `end` short of the last row —
   * the unit the next row belongs to (its cursor) and how many of that unit's rows are done. A
   * window's checkpoint then lands inside a unit as it would had the unit been written alone, so
   * windows may cover many units while a retry still resumes at the right row. Without it a
   * checkpoint short of the end records `end` as processedOffset.
   */
  positionAfter?(end: number): { cursor: Record<string, unknown>; processedOffset: number };
  /**
   * Whether this pass applies `row` again to the record the ledger already holds for it (e.g. the
   * catch-up pass, for a row the customer changed mid-run): the writer then gets the held slot and
   * returns "updated". Without it (and for every row it refuses), a row the ledger holds is written
   * as nothing and counted already here: each window asks the ledger once which of its rows it holds.
   */
  reapply?(row: SourceRow<T>): boolean;
  /**
   * For a source without a ledger (ledger mode `none`), on a pass that writes rows an earlier pass
   * noted (a re-drive): each row written settles the run's earlier notes about it (they no longer
   * hold), in the window's transaction, so the run's counts move the row
   * from failed to written exactly when it commits. A ledgered source needs nothing: its ledger
   * slot says the same.
   */
  settlesNotes?: boolean;
}

export interface WriteSummary {
  attempted: number;
  created: number;
  matched: number;
  alreadyHere: number;
  skipped: number;
  failed: number;
}

export interface TaskContext extends RunFacts {
  run: RunInfo;
  /** Live view: cursor and processedOffset move as windows commit. */
  task: TaskInfo;
  signal: AbortSignal;
  /**
   * Writes rows in windows with one savepoint per row and the checkpoint in each window's
   * transaction. Rows before task.processedOffset were committed by an earlier attempt and are skipped.
   */
  writeRows<T>(
    rows: readonly SourceRow<T>[],
    writer: RowWriter<T>,
    options?: WriteOptions<T>,
  ): Promise<WriteSummary>;
  /**
   * The batched path: each window (up to `windowSize`, default 500 rows) is one writeBatch plus,
   * with a per-row ledger, one multi-row ledger claim, and the checkpoint, in one transaction. Only
   * a window whose batch fails (a bad row, a ledger slot already taken) is written again row by row
   * with savepoints, in transactions of at most 25 rows. Same skipping and checkpoint rules as writeRows.
   * On both paths a row the ledger already holds is written as nothing (already here) unless
   * options.reapply takes it: each window asks the ledger once, so a re-run costs no writes, and
   * held rows running unbroken for at least a window (a page held whole) are asked about in one
   * query and passed with the task's checkpoint alone, without a window transaction.
   */
  writeBatches<T>(
    rows: readonly SourceRow<T>[],
    /**
     * The writer, or how to build it for `toWrite` (e.g. after resolving those rows' parents): built
     * once, before the first window that writes anything, for the rows the ledger was not found to
     * hold, and not at all when every row is held; built again for every row should a window have
     * to write one outside `toWrite`.
     */
    writer: BatchWriter<T> | ((toWrite: readonly SourceRow<T>[]) => Promise<BatchWriter<T>>),
    options?: WriteOptions<T> & { windowSize?: number },
  ): Promise<WriteSummary>;
  /*
   * runFact / settleRunFact (RunFacts): facts about the source learned during this run and shared
   * by all its tasks (e.g. whether the account's mail lists carry bodies), so the run decides them
   * once; the first task to settle one wins.
   */
  /**
   * A run note about what the source did not say and what the run assumed instead (an account that
   * does not answer a field, a count a list contradicts), unless the run already has the same note:
   * a retried or resumed task says it once.
   */
  noteOnce(note: SourceNote): Promise<void>;
  /**
   * The cursors of this run's tasks of `kind` that carry `key`, oldest first: what earlier tasks
   * kept for later ones (e.g. the message count each deal's mail was listed against, which a later
   * pass compares the deal's count with). Absent where the engine keeps no tasks.
   */
  keptCursors?(kind: string, key: string): Promise<Record<string, unknown>[]>;
  /** The ledger of the run's tenant, source and account, read only. */
  ledger: LedgerLookup;
  /** Source id -> local record id for created or matched rows of the given kinds; one query. */
  resolveParents(wanted: Readonly<Record<string, readonly string[]>>): Promise<ParentMap>;
  /**
   * Moves the task's cursor without writing rows (its processed offset stays), fenced by the claim
   * like a window's checkpoint. For what a task fetched and could not write before a rate limit
   * parks it: kept in the cursor, the next attempt starts from it instead of asking again.
   */
  keepCursor(cursor: Record<string, unknown>): Promise<void>;
  /**
   * A follow pass's deletion sweep: the tenant's ledger rows of `kind` from this source account
   * (created or matched), each with whether an earlier pass found it deleted at the source.
   */
  heldSourceRows?(kind: string): Promise<{ sourceId: string; deleted: boolean }[]>;
  /**
   * How many of those rows there are, and how many an earlier pass found deleted: for a sweep that
   * reads the rows themselves only when the source's own count says something changed.
   */
  heldSourceCounts?(kind: string): Promise<{ held: number; deleted: number }>;
  /**
   * Applies what a sweep found, with the task's checkpoint (`cursor`) in one transaction fenced by
   * the claim: created records marked deleted (or restored), matched ones only noted. Rows already
   * in that state change nothing. Returns how many rows this call changed.
   */
  applySourceDeletions?(
    kind: string,
    change: SourceDeletions,
    cursor: Record<string, unknown>,
  ): Promise<{ deleted: number; restored: number }>;
  /** Tells JetStream the task is alive; call during long fetches. */
  working(): void;
  /**
   * The source account's budget as this worker sees it: leased from the coordinator, shared by
   * every task of this process on the account. Absent when running without a coordinator.
   */
  pacer?: BudgetPacer | undefined;
}

/** Source rows a sweep confirmed deleted at the source, and rows marked so that it lists again. */
export interface SourceDeletions {
  gone: readonly string[];
  restored: readonly string[];
}

export interface ParentMap {
  get(kind: string, sourceId: string | null | undefined): number | undefined;
  /**
   * Whether the row would be linked to this parent: its record exists (get), or, in a dry run, an
   * earlier window of the run would have created or matched it (it has no record id: the window
   * that would have written it was rolled back). A writer decides "not linked" by this, never by get.
   */
  has(kind: string, sourceId: string | null | undefined): boolean;
  /** Set only in a dry run: the rows its earlier windows would have written stand in for the ledger's. */
  readonly dryRun?: DryRunMatches | undefined;
}

export interface TaskResult {
  /** Tasks to create together with this one's success, e.g. the next page of a stripe. */
  successors?: TaskSeed[];
}

/** A same-phase reference resolved when the barrier passes: `table.column` of `kind` rows points at `ref`. */
export interface DeferredLink {
  kind: string;
  ref: string;
  table: string;
  column: string;
}

export interface Provider {
  readonly name: string;
  /** Ordered kind groups; kinds in one group may only reference each other through deferredLinks. */
  readonly phases: readonly (readonly string[])[];
  readonly deferredLinks?: readonly DeferredLink[];
  /**
   * Kinds of the last phase that every run importing anything else gets, asked for or not: a pass
   * over what the customer changed while the run lasted is part of importing any kind.
   */
  readonly closingKinds?: readonly string[];
  /** How source rows are accounted for; `per-row` when absent. */
  readonly ledger?: LedgerMode;
  /** Returns a sentence saying what to fix, or undefined when the configuration is usable. */
  validateConfig(config: {
    baseUrl: string;
    apiToken: string;
    settings: Record<string, string>;
  }): string | undefined;
  seedPhase(ctx: SeedContext): Promise<TaskSeed[]>;
  runTask(ctx: TaskContext): Promise<TaskResult>;
  /** Checks a finished run against the source (counts and a sample); VerifyRun needs it. */
  readonly verifier?: ProviderVerifier;
  /**
   * Re-drive (RetryRun with a filter): tasks that read the given rows of a kind from the source
   * again and write them through the ledger like any pass. Absent: the source cannot re-drive rows.
   */
  readonly redrive?: RowRedrive;
  /**
   * The source's change feed (webhooks), for a follow run: registered when it starts following,
   * removed when it cuts over or stops. Absent: a follow run polls.
   */
  readonly webhooks?: SourceWebhooks;
  /**
   * The source calls a live run still needs, per kind, from what it has learned so far (rows per
   * page, messages per deal, the cost of each call type); the coordinator sets them against the
   * account's budget for the run's ETA. Reads only (its ledger and facts); the run's tasks come
   * tallied by the engine, which owns what their statuses mean.
   */
  estimateWork?(ctx: EstimateContext): Promise<WorkEstimate>;
  /**
   * The time zone whose midnight the run's source account is believed to reset its daily allowance
   * at, from the run's settings, while the source has not shown its own; undefined when the source
   * has no such rule (the run page then says nothing of it).
   */
  dailyResetTimeZone?(run: RunInfo): string | undefined;
  /**
   * Where the records this provider's writers create live in the product and how they refer to
   * each other: what RevertRun (engine revert.ts) needs to remove a run's records. A provider
   * without it (or without a per-row ledger) cannot be reverted.
   */
  readonly productRecords?: ProductRecords;
}

/** What a work estimate may read: the run's tasks tallied, its facts, its ledger, the product. */
export interface EstimateContext {
  run: RunInfo;
  tasks: readonly TaskTally[];
  /** The product's tables, read only. */
  db: Queryable;
  ledger: LedgerLookup;
  runFact(key: string): Promise<unknown>;
}

/** The product tables behind a provider's ledger record types, and the links between them. */
export interface ProductRecords {
  /** Record type (the ledger's record_type) → its product table, schema-qualified (`app.contacts`). Each has `id` and `tenant_id`. */
  readonly tables: Readonly<Record<string, string>>;
  readonly links: readonly RecordLink[];
}

/**
 * A record of `recordType` refers to a `parent` record through `column`. `required`: the column
 * cannot be empty (an email without its deal), so clearing the link means removing the record.
 */
export interface RecordLink {
  recordType: string;
  column: string;
  parent: string;
  required?: boolean;
}

/**
 * A run's tasks still to run, running or succeeded (failed and cancelled ones left out), counted
 * per kind, status and cursor: what a source's work estimate reads of them.
 */
export interface TaskTally {
  kind: string;
  status: "pending" | "running" | "succeeded";
  cursor: Record<string, unknown>;
  n: number;
}

/** What one kind of a live run still needs from the source. */
export interface CallsLeft {
  kind: string;
  requests: number;
  /** What those requests cost against the source's daily allowance. */
  tokens: number;
  /** The run cannot know more yet (a list whose end is not reached, a phase not begun): a floor. */
  atLeast: boolean;
}

export interface WorkEstimate {
  kinds: CallsLeft[];
  /** The account's daily allowance in tokens, where the run's settings state it. */
  dailyTokens?: number;
}

/**
 * How a source reads chosen rows of a kind again, for re-drive: the capability a source declares.
 * - `by-id`: it can ask the source for a row by its id (a GET by id, a list's `ids` filter).
 * - `by-listing`: it cannot (a table read by keyset, a mail message that only its deal's list
 *   links to a deal): it walks again the listing unit that held each row (a keyset range of a
 *   slot, a mail task's deals), found from the task that noted the row, and writes only the rows
 *   asked for.
 */
export type RedriveReads = "by-id" | "by-listing";

/** One row a re-drive reads again. */
export interface RedriveRow {
  sourceId: string;
  /**
   * For a `by-listing` kind: the cursor of the task that last noted the row (the note still
   * holding), as it stands now: where the row was listed. Its unit (a slot's bounds, a mail
   * task's deals) is what the re-drive walks; a re-drive task's own cursor must keep that unit,
   * since a row it fails again is noted by it. Absent for a `by-id` kind.
   */
  listedIn?: Record<string, unknown>;
}

/**
 * What every re-drive task's seed key begins with. A re-drive reads rows that failed already: those
 * failing again stay failed with a fresh note and do not fail the task (nor the run) the way a
 * first pass whose every row fails does.
 */
export const REDRIVE_SEED_KEY_PREFIX = "redrive:";

/** How a source reads chosen rows again, for re-drive. */
export interface RowRedrive {
  /** Whether rows of `kind` are read by id or by walking again the listing that held them. */
  reads(kind: string): RedriveReads;
  /**
   * Why rows of `kind` cannot be read again at all, or undefined when they can.
   */
  refuses(kind: string): string | undefined;
  /**
   * Tasks reading `rows` of `kind` again; `key` makes their seed keys unique to this re-drive, and
   * every seed key begins with REDRIVE_SEED_KEY_PREFIX (the engine knows a re-drive task by it). For
   * a `by-listing` kind every row carries `listedIn`; a row whose listing the source cannot walk
   * again is a refusal: throw PermanentError saying which.
   */
  seeds(kind: string, rows: readonly RedriveRow[], key: string): TaskSeed[];
}

/** Where and how the source must deliver a run's change events (the receiver, services/receiver). */
export interface WebhookTarget {
  url: string;
  user: string;
  password: string;
}

/**
 * A source's webhooks. `register` makes what the run's kinds need and returns their ids at the
 * source; it removes what it made before throwing, so a refused registration leaves nothing behind.
 * `remove` deletes them; one already gone is not an error.
 */
export interface SourceWebhooks {
  register(run: RunInfo, secret: string, target: WebhookTarget): Promise<string[]>;
  remove(run: RunInfo, secret: string, ids: readonly string[]): Promise<void>;
  /**
   * The row a delivered event (its parsed JSON body, as the receiver stored it) says changed: its
   * kind, its source id and when it changed (ISO 8601, null when the event does not say); undefined
   * for an event no run of this source can use (an object it does not import, no id).
   */
  eventChange(body: unknown): { kind: string; id: string; timestamp: string | null } | undefined;
  /**
   * Tasks on a follow run's closing phase that read again the rows of `kind` events named. `batch`
   * names the events they came from, so seeding the same batch twice is a no-op; every seed key
   * begins with REDRIVE_SEED_KEY_PREFIX (a row still bad at the source is noted, not fatal).
   */
  eventSeeds(kind: string, ids: readonly string[], batch: string): TaskSeed[];
}
