import { sleep } from "@drover/provider-sdk";

/**
 * HubSpot's search endpoints are limited to five requests a second per account (the search guide's
 * Limitations, quoted in activepieces/activepieces#10160), and their answers carry no
 * `X-HubSpot-RateLimit-*` headers: nothing a search answers can pace the next one. So searches are
 * paced here on the documented rate: at most `perSecond` in any second.
 *
 * A search's second is counted from when its answer came back, not from when it was sent: HubSpot
 * admitted it somewhere in between, and only the answer's time is sure to be after that. Counted
 * from the sending, a first search slowed on its way (a new connection, a busy machine) was
 * admitted late enough that the sixth, sent a second after it, was refused (seen in the catch-up
 * test on two busy cores). One pace per account and process, shared by every task that searches it.
 */
export class SearchPace {
  /** When each search of the last second was answered; Infinity while it is in flight. */
  private recent: { answeredAt: number }[] = [];
  private queue: Promise<void> = Promise.resolve();

  constructor(private readonly perSecond: number) {}

  /** Runs `search` when one more may go out (in the order asked), and counts it from its answer. */
  async run<T>(search: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.perSecond <= 0) return search();
    const turn = this.queue.then(() => this.take(signal));
    // A waiter that was aborted must not hold up the ones behind it.
    this.queue = turn.then(
      () => {},
      () => {},
    );
    const slot = await turn;
    try {
      return await search();
    } finally {
      slot.answeredAt = Date.now();
    }
  }

  /** When the searches answered in the last second were answered: for whoever searches next elsewhere. */
  answeredLastSecond(now = Date.now()): number[] {
    return this.recent.map((s) => s.answeredAt).filter((t) => Number.isFinite(t) && t > now - 1000);
  }

  /**
   * Counts searches another process of the same account answered (a task handing its walk on to a
   * successor another worker may run): this pace knows only its own, and five there and five here
   * in one second is a 429.
   */
  remember(answeredAt: readonly number[], now = Date.now()): void {
    for (const t of answeredAt) if (t > now - 1000) this.recent.push({ answeredAt: t });
  }

  private async take(signal?: AbortSignal): Promise<{ answeredAt: number }> {
    for (;;) {
      const now = Date.now();
      this.recent = this.recent.filter((s) => s.answeredAt > now - 1000);
      if (this.recent.length < this.perSecond) {
        const slot = { answeredAt: Number.POSITIVE_INFINITY };
        this.recent.push(slot);
        return slot;
      }
      const finite = this.recent.map((s) => s.answeredAt).filter(Number.isFinite);
      // All in flight: wait for an answer; else until the earliest answered leaves the second.
      await sleep(finite.length > 0 ? Math.min(...finite) + 1000 - now + 1 : 20, signal);
    }
  }
}

const paces = new Map<string, SearchPace>();

/** The account's search pace in this process. */
export function searchPaceOf(account: string, perSecond: number): SearchPace {
  const key = `${account}\u0000${perSecond}`;
  let pace = paces.get(key);
  if (!pace) {
    pace = new SearchPace(perSecond);
    paces.set(key, pace);
  }
  return pace;
}
