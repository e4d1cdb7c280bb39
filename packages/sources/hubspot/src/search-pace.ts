import { randomUUID } from "node:crypto";
import { sleep } from "@drover/provider-sdk";

/**
 * A search answered: when, and by which process's pace. A task hands its process's marks on to its
 * successor; the process that runs the successor may be the same one, or one that handed them on
 * before, and a search counted twice holds the next one back for nothing (a catch-up chain in one
 * worker waited 0.6 s on its fourth and seventh types, counting its own searches again).
 */
export interface SearchMark {
  at: number;
  by: string;
  /** The search's number in its pace (two may be answered in one millisecond). */
  n: number;
}

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
  /** This pace's own name in the marks it hands on. */
  readonly id = randomUUID();
  /** When each search of the last second was answered (Infinity while it is in flight), and whose. */
  private recent: { answeredAt: number; by: string; n: number }[] = [];
  private searches = 0;
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

  /** The searches answered in the last second, this process's and those it was told of: for whoever searches next elsewhere. */
  answeredLastSecond(now = Date.now()): SearchMark[] {
    return this.recent
      .filter((s) => Number.isFinite(s.answeredAt) && s.answeredAt > now - 1000)
      .map((s) => ({ at: s.answeredAt, by: s.by, n: s.n }));
  }

  /**
   * Counts searches another process of the same account answered (a task handing its walk on to a
   * successor another worker may run): this pace knows only its own, and five there and five here
   * in one second is a 429. A mark this pace already holds (its own, or one it was told of before)
   * is counted once. A bare instant (a cursor written before marks named their pace) is another
   * process's unless this pace holds one at that very millisecond.
   */
  remember(marks: readonly (SearchMark | number)[], now = Date.now()): void {
    for (const mark of marks) {
      const { at, by, n } = typeof mark === "number" ? { at: mark, by: undefined, n: -1 } : mark;
      if (!(at > now - 1000) || by === this.id) continue;
      if (this.recent.some((s) => (by === undefined ? s.answeredAt === at : s.by === by && s.n === n)))
        continue;
      this.recent.push({ answeredAt: at, by: by ?? "", n });
    }
  }

  private async take(signal?: AbortSignal): Promise<{ answeredAt: number; by: string; n: number }> {
    for (;;) {
      const now = Date.now();
      this.recent = this.recent.filter((s) => s.answeredAt > now - 1000);
      if (this.recent.length < this.perSecond) {
        const slot = { answeredAt: Number.POSITIVE_INFINITY, by: this.id, n: this.searches++ };
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
