import type { Queryable } from "@drover/db/connection";
import type { BudgetPacer } from "./budget-pacer.js";
import type { VerifyCapabilities } from "./capabilities.js";
import { RateLimitedError, TransientError } from "./errors.js";
import type { RunInfo } from "./run-info.js";
import { sleep } from "./sleep.js";

/**
 * What a provider needs to check a finished run against its source: the run (with its secret), the
 * source account's budget, and a read-only view of the destination.
 */
export interface VerifyContext extends VerifyCapabilities {
  run: RunInfo;
  signal: AbortSignal;
  /**
   * The source account's shared budget. Verification spends it like any other call: build the
   * SourceClient the way runTask does, with this pacer.
   */
  pacer?: BudgetPacer | undefined;
  /** Reads the destination's tables; verification never writes through it. The ledger: `ledger`. */
  db: Queryable;
  /** Scratch space shared by one verification's calls, e.g. a listing one kind needs for another. */
  memo: Map<string, unknown>;
}

/** A ledger row picked for the sample, and the destination record it points to. */
export interface SampleEntry {
  sourceId: string;
  action: "created" | "matched";
  recordType: string;
  recordId: number;
}

export interface SampleMismatch {
  sourceId: string;
  /** A sentence naming the field and both values, e.g. `email is "a@x.io" in the source but "b@x.io" in contact 7`. */
  problem: string;
}

/** One slot (or key range) of a ledgerless kind: the source's rows against the destination's. */
export interface SlotVerification {
  slot: string;
  sourceCount: number;
  destinationCount: number;
  /** Source rows of the slot this run noted as failed (they have no destination row, by design). */
  failedCount: number;
  sampled: number;
}

/** A kind verified without a ledger (ledger mode `none`), by the provider itself. */
export interface KindVerification {
  sourceCount: number;
  destinationCount: number;
  failedCount: number;
  sampled: number;
  /** Every discrepancy, each starting with the source id (or slot) it concerns. */
  mismatches: string[];
  slots: SlotVerification[];
}

/** Optional on a Provider: without it, runs of that source cannot be verified. */
export interface ProviderVerifier {
  /**
   * For sources without a ledger (ledger mode `none`), where there is no ledger row to compare a
   * source id with: the provider compares the source with the destination itself, per slot — the
   * counts, every missing or unexpected key where they differ, and `sampleSize` rows per slot field
   * by field. `failedIds` are the source ids the run noted as failed: they count as accounted for.
   */
  verifyKind?(
    ctx: VerifyContext,
    kind: string,
    options: { sampleSize: number; failedIds: ReadonlySet<string> },
  ): Promise<KindVerification>;
  /**
   * Every id the source lists for `kind` now, in the form the ledger keys it. A row without a
   * usable id is named the way the import notes it, so the two can be compared. Costs source calls
   * like an import does: verification calls it only where the import's own listing cannot answer
   * (a run whose tasks kept no listing, or one that did not finish every listing), or where the
   * source's cheap count disagrees with that listing, to name the rows that differ.
   */
  sourceIds(ctx: VerifyContext, kind: string): Promise<string[]>;
  /**
   * How many rows the source holds for `kind` now, where the source can say so cheaply (a call or
   * two, not a walk of its lists); undefined where it cannot. Checked against what the import
   * listed: it is what catches a row the source has and the import never listed.
   */
  sourceCount?(ctx: VerifyContext, kind: string): Promise<number | undefined>;
  /**
   * How many of `sampleSize` sampled rows of `kind` to compare: a source that fetches a sample
   * row with a request of its own may compare fewer than one that fetches many rows per request.
   * All of them when absent.
   */
  sampleLimit?(kind: string, sampleSize: number): number;
  /**
   * Fetches each entry's row from the source again and compares every field the destination keeps
   * (and the parent links) with the record the ledger points to. Returns one mismatch per field
   * that differs, or per row that is gone or no longer parses.
   */
  compareSample(ctx: VerifyContext, kind: string, entries: readonly SampleEntry[]): Promise<SampleMismatch[]>;
}

/**
 * Runs one source call outside any task, with the task's taxonomy: a transient failure is retried
 * with growing backoff (a task would be released and retried), a rate limit waits for its reset
 * when that is near. Anything else, and the last failure, is thrown.
 */
export async function withRetries<T>(
  call: () => Promise<T>,
  options: { signal?: AbortSignal; attempts?: number; maxWaitMs?: number } = {},
): Promise<T> {
  const attempts = options.attempts ?? 6;
  const maxWaitMs = options.maxWaitMs ?? 60_000;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (options.signal?.aborted || attempt >= attempts) throw err;
      if (err instanceof RateLimitedError) {
        const wait = err.retryAt.getTime() - Date.now();
        if (wait > maxWaitMs) throw err;
        await sleep(Math.max(wait, 100), options.signal);
      } else if (err instanceof TransientError) {
        await sleep(Math.min(200 * 2 ** (attempt - 1), 5_000), options.signal);
      } else {
        throw err;
      }
    }
  }
}

/**
 * One comparable form for a source's value and a destination column's: text, numbers and booleans
 * as text, dates as epoch milliseconds, objects and arrays as canonical JSON (keys sorted), null.
 */
export function comparable(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint")
    return String(value);
  if (value instanceof Date) return String(value.getTime());
  return canonicalJson(value);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) =>
      a < b ? -1 : a > b ? 1 : 0,
    );
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** A comparable value as a mismatch's sentence shows it: quoted, cut at 80 characters, or "empty". */
export function shownValue(value: string | null): string {
  if (value === null) return "empty";
  const quoted = JSON.stringify(value);
  return quoted.length > 80 ? `${quoted.slice(0, 77)}..."` : quoted;
}
