import type { BudgetPacer, PacedAnswer } from "@drover/provider-sdk";

/**
 * Counts the source calls of one task attempt through the pacer every call answers to (each answer,
 * refusals and failed calls included, is absorbed once, and spent the account's budget the same
 * way). The counts since the last take go into the task's stats with its next checkpoint, so they
 * commit with the work they paid for: `source_requests` and `source_tokens`.
 */
export class SourceCallCounter {
  readonly pacer: BudgetPacer | undefined;
  private requests = 0;
  private tokens = 0;

  constructor(inner: BudgetPacer | undefined) {
    if (!inner) {
      this.pacer = undefined;
      return;
    }
    const absorb = (answer: PacedAnswer) => {
      this.requests++;
      this.tokens += answer.cost;
      inner.absorb(answer);
    };
    // A view of the shared pacer, not a copy: slots, walls and readings stay the account's.
    this.pacer = new Proxy(inner, {
      get(target, prop) {
        if (prop === "absorb") return absorb;
        const value = Reflect.get(target, prop, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  }

  /** Puts back what a take handed to a checkpoint that was not written, for the next one to carry. */
  restore(taken: Record<string, number>): void {
    this.requests += taken.source_requests ?? 0;
    this.tokens += taken.source_tokens ?? 0;
  }

  /** The calls counted since the last take, as stats deltas (empty when there were none). */
  take(): Record<string, number> {
    if (this.requests === 0) return {};
    const taken = { source_requests: this.requests, source_tokens: this.tokens };
    this.requests = 0;
    this.tokens = 0;
    return taken;
  }
}
