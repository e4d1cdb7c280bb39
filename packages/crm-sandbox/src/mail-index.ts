import { unit } from "./prng.js";

export interface MailLocation {
  dealId: number;
  /** Position of the message inside its deal, 0-based. */
  index: number;
}

/**
 * Per-deal message counts and their prefix sums, computed once at start. Mail ids must be globally
 * unique ints derivable from (dealId, index) without storing messages: id = firstId(deal) + index.
 */
export class MailIndex {
  private readonly counts: Uint8Array;
  /** offsets[d - 1] = number of messages of deals 1..d-1. */
  private readonly offsets: Uint32Array;

  constructor(seed: number, deals: number, perDealMax: number, heavyRate: number) {
    this.counts = new Uint8Array(deals);
    this.offsets = new Uint32Array(deals + 1);
    for (let dealId = 1; dealId <= deals; dealId++) {
      let count = 0;
      if (perDealMax > 0) {
        // Heavy deals exist so that parallel body fetching has something to chew on in benchmarks.
        count =
          unit(seed, "mail/heavy", dealId) < heavyRate
            ? 8 + Math.floor(unit(seed, "mail/heavy-count", dealId) * 5)
            : Math.floor(unit(seed, "mail/count", dealId) * (perDealMax + 1));
      }
      this.counts[dealId - 1] = count;
      this.offsets[dealId] = (this.offsets[dealId - 1] as number) + count;
    }
  }

  get total(): number {
    return this.offsets[this.counts.length] as number;
  }

  countFor(dealId: number): number {
    return this.counts[dealId - 1] ?? 0;
  }

  idFor(dealId: number, index: number): number {
    return (this.offsets[dealId - 1] as number) + index + 1;
  }

  locate(mailId: number): MailLocation | undefined {
    if (!Number.isInteger(mailId) || mailId < 1 || mailId > this.total) return undefined;
    // Last deal whose offset is below mailId: binary search over the prefix sums.
    let lo = 0;
    let hi = this.counts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if ((this.offsets[mid] as number) < mailId) lo = mid;
      else hi = mid - 1;
    }
    return { dealId: lo + 1, index: mailId - 1 - (this.offsets[lo] as number) };
  }
}
