import type { Tx } from "@drover/db";
import type { Pacer } from "./source-client.js";
import type { ProviderVerifier } from "./verify.js";

/** What a provider sees of the run. The secret is present only where a worker needs it. */
export interface RunInfo {
  id: string;
  tenantId: string;
  source: string;
  sourceAccount: string;
  kinds: readonly string[];
  plan: readonly (readonly string[])[];
  sourceConfig: Record<string, unknown>;
  secret?: string | undefined;
  startedAt: Date | null;
}

/** A unit of work to create. Seeding the same seedKey twice in one run is a no-op. */
export interface TaskSeed {
  kind: string;
  seedKey: string;
  cursor: Record<string, unknown>;
}

export interface SeedContext {
  run: RunInfo;
  phase: number;
  /** The kinds of the phase being seeded (already filtered to the run's kinds). */
  kinds: readonly string[];
  /**
   * The barrier's transaction: seeding commits together with the barrier moving, or not at all.
   * Read the database here; never the network.
   */
  tx: Tx;
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
    }
  | { action: "skipped"; reason: string }
  /**
   * The ledger already points at recordId (an earlier pass created or matched it) and the writer
   * changed that record in place, e.g. a catch-up pass applying what the customer edited mid-run.
   * No ledger claim is made: the slot stays as it was. Counted as already here.
   */
  | { action: "updated"; recordType: string; recordId: number };

/**
 * Writes one row inside its savepoint. Throw RowError (or let a constraint fail) to lose only this
 * row; any other failure aborts the window and retries the task.
 */
export type RowWriter<T> = (tx: Tx, row: T, sourceId: string) => Promise<RowResult>;

export interface WriteOptions {
  /**
   * Where the task stands once every row given has been committed. Written in the last window's
   * transaction so a retry starts after these rows, e.g. the next deal of a mail task.
   */
  nextCursor?: Record<string, unknown>;
}

export interface WriteSummary {
  attempted: number;
  created: number;
  matched: number;
  alreadyHere: number;
  skipped: number;
  failed: number;
}

export interface TaskContext {
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
    options?: WriteOptions,
  ): Promise<WriteSummary>;
  /** Source id -> local record id for created or matched rows of the given kinds; one query. */
  resolveParents(wanted: Readonly<Record<string, readonly string[]>>): Promise<ParentMap>;
  /** Tells JetStream the task is alive; call during long fetches. */
  working(): void;
  /**
   * The source account's budget as this worker sees it: leased from the coordinator, shared by
   * every task of this process on the account. Absent when running without a coordinator.
   */
  pacer?: Pacer | undefined;
}

export interface ParentMap {
  get(kind: string, sourceId: string | null | undefined): number | undefined;
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
}
