import { sleep } from "./sleep.js";
import type { BudgetReading } from "./source-adapter.js";

/** A source's answer as a budget pacer learns from it: already read by the source's adapter. */
export interface PacedAnswer {
  /** The HTTP status; 0 when the request never got an answer. */
  status: number;
  /** What the call cost against the daily allowance. */
  cost: number;
  reading: BudgetReading;
}

/**
 * Paces calls against the source account's budget. acquire() hands out slots: instants from which
 * a request may be sent, each usable only until `graceMs` after it. absorb() learns from each
 * answer. HeaderBudgetPacer paces one process by the last answer it saw; the worker's leased
 * budget, shared through the coordinator, takes its place without touching the providers.
 */
export interface BudgetPacer {
  /** Slot times (epoch ms), one per request, ascending. `cost` is what each request will cost. */
  acquire(cost: number, signal?: AbortSignal, count?: number): Promise<number[]>;
  /** How late after its time a slot may still be used. */
  readonly graceMs: number;
  absorb(answer: PacedAnswer): void;
  /**
   * The end of the account's current wall (epoch ms): no request may go out before it, whatever
   * slot it holds. 0 when there is none.
   */
  wallUntil?(): number;
  /**
   * Slots handed out that will never be used (a wall took them back, or they came too late), of
   * calls costing `cost`, the earliest at `earliestSlot`: a slot's tokens go back to its own day only.
   */
  release?(count: number, cost?: number, earliestSlot?: number): void;
}

/** Stays under the burst window by what the answers say is left in it and when it ends. */
export class HeaderBudgetPacer implements BudgetPacer {
  readonly graceMs = Number.POSITIVE_INFINITY;
  private remaining = Number.POSITIVE_INFINITY;
  private resetAt = 0;
  private inFlight = 0;
  /** Kept apart from resetAt: a later answer's burst window must not lower a refusal's wall. */
  private wallAt = 0;

  async acquire(_cost: number, signal?: AbortSignal, count = 1): Promise<number[]> {
    for (;;) {
      const now = Date.now();
      if (now < this.wallAt) {
        await sleep(this.wallAt - now, signal);
        continue;
      }
      if (now >= this.resetAt) this.remaining = Number.POSITIVE_INFINITY;
      if (this.remaining - this.inFlight >= count) {
        this.inFlight += count;
        return Array.from({ length: count }, () => now);
      }
      await sleep(Math.max(50, this.resetAt - now), signal);
    }
  }

  absorb({ reading }: PacedAnswer): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (reading.burstRemaining !== undefined) this.remaining = reading.burstRemaining;
    if (reading.burstResetAt !== undefined) this.resetAt = reading.burstResetAt;
    if (reading.blockedUntil !== undefined && reading.blockedUntil > Date.now()) {
      // A refusal: the other tasks of this process wait for it too instead of each meeting it.
      this.remaining = 0;
      this.resetAt = Math.max(this.resetAt, reading.blockedUntil);
      this.wallAt = Math.max(this.wallAt, reading.blockedUntil);
    }
  }

  wallUntil(): number {
    return this.wallAt;
  }

  release(count: number): void {
    this.inFlight = Math.max(0, this.inFlight - count);
  }
}
