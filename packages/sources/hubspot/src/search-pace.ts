import { sleep } from "@drover/provider-sdk";

/**
 * HubSpot's search endpoints are limited to five requests a second per account (the search guide's
 * Limitations, quoted in activepieces/activepieces#10160), and their answers carry no
 * `X-HubSpot-RateLimit-*` headers: nothing a search answers can pace the next one. So searches are
 * paced here on the documented rate, by the times they were sent: at most `perSecond` in any second.
 * One pace per account and process, shared by every task that searches it.
 */
export class SearchPace {
  private readonly sent: number[] = [];
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly perSecond: number,
    /** Added to the second: a request sent a second after another may arrive sooner than it left. */
    private readonly marginMs = 50,
  ) {}

  /** Resolves when one more search may go out; in the order asked. */
  take(signal?: AbortSignal): Promise<void> {
    const turn = this.queue.then(() => this.wait(signal));
    // A waiter that was aborted must not hold up the ones behind it.
    this.queue = turn.catch(() => {});
    return turn;
  }

  private async wait(signal?: AbortSignal): Promise<void> {
    if (this.perSecond <= 0) return;
    const span = 1000 + this.marginMs;
    for (;;) {
      const now = Date.now();
      while (this.sent.length > 0 && (this.sent[0] as number) <= now - span) this.sent.shift();
      if (this.sent.length < this.perSecond) {
        this.sent.push(now);
        return;
      }
      await sleep((this.sent[0] as number) + span - now, signal);
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
