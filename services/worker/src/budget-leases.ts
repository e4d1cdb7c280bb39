import {
  BudgetExhausted_Scope,
  type BudgetReport,
  budgetReportRequest,
  type Client,
  Code,
  isRpcError,
  timestampDate,
  type WorkerService,
} from "@drover/proto";
import {
  type BudgetPacer,
  type PacedAnswer,
  RateLimitedError,
  sleep,
  TransientError,
} from "@drover/provider-sdk";
import { FIRST_PROBE_MS } from "@drover/provider-sdk/engine";
import { metrics } from "@drover/telemetry";

/** Readings are reported at most this often, unless the daily counter moved or a 429 came back. */
const REPORT_EVERY_MS = 30_000;
/** A wait longer than this parks the task rather than holding a lane slot. */
const PARK_AFTER_MS = 10_000;
/** What a source that sends no rate-limit headers is paced at, per burst window. */
const UNLIMITED = 100_000;

const leaseWait = metrics.histogram(
  "drover_worker_lease_wait_seconds",
  "Time tasks waited for a source budget lease",
  [],
  [0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10],
);
const rateLimited = metrics.counter("drover_worker_source_429_total", "Responses the source answered 429", [
  "account",
]);

/**
 * One account's budget as this worker process sees it: slots leased from the coordinator's
 * BudgetKeeper and shared by every task of the process on that account. What the source's answers
 * say is absorbed in memory — no database write per response — and reported in a throttled way:
 * at most every 30 s, at once when the daily allowance moved or a refusal arrived, and always
 * before a lease. A report carries only the readings that changed, and `spent` as an increment.
 */
export class LeasedBudgetPacer implements BudgetPacer {
  /** How late a slot may still be used: the coordinator's, sent with each grant (see BudgetKeeper). */
  graceMs = 0;
  /**
   * Leased slots by what each call costs: the coordinator counts a grant off the day (and the run's
   * share) at the cost it was leased for, so a slot leased for a 2-token get is never spent on a
   * 20-token list.
   */
  private readonly pools = new Map<number, SlotPool>();
  private blockedUntil = 0;
  /** Readings not yet reported. */
  private pending: BudgetReport = { spent: 0 };
  private known: {
    capacity?: number;
    windowMs?: number;
    dailyRemaining?: number;
    dailyResetAt?: number;
    dailyLimit?: number;
  } = {};
  private reportedAt = Date.now();
  private reporting: Promise<void> | undefined;
  /** When a task last asked for a slot or handed in an answer: an idle run's pacer is let go. */
  usedAt = Date.now();

  constructor(
    private readonly client: Pick<Client<typeof WorkerService>, "leaseBudget" | "reportBudget">,
    private readonly account: { source: string; sourceAccount: string; workerId: string },
    /** The run whose tasks use this pacer ("" for none): the coordinator caps it by its daily share. */
    private readonly runId = "",
    /** Called when the account's day is spent, so the other runs' pacers of this process wall too. */
    private readonly onAccountWall: (until: number) => void = () => {},
  ) {}

  async acquire(cost: number, signal?: AbortSignal, count = 1): Promise<number[]> {
    const out: number[] = [];
    const started = Date.now();
    this.usedAt = started;
    const pool = this.pools.get(cost) ?? { slots: [], demand: 0, leasing: undefined, waiters: 0 };
    this.pools.set(cost, pool);
    pool.demand += count;
    try {
      while (out.length < count) {
        signal?.throwIfAborted();
        // A slot granted before a wall went up is never handed out: nothing may go out before it.
        const usableFrom = Math.max(Date.now() - this.graceMs + 5, this.blockedUntil);
        const earliest = pool.slots[0];
        let late = 0;
        while (pool.slots.length > 0 && pool.slots[0]! < usableFrom) {
          pool.slots.shift();
          late++;
        }
        if (late > 0) this.giveBack(late, cost, earliest!);
        if (pool.slots.length > 0) {
          out.push(pool.slots.shift()!);
          pool.demand--;
          continue;
        }
        if (!pool.leasing) {
          // One lease for every acquire waiting on the pool, so no one waiter's signal may end it:
          // a task whose claim was lost must not fail its siblings' calls with its abort. It ends
          // only when every waiter has gone.
          const stop = new AbortController();
          const leasing = this.lease(pool, Math.max(1, pool.demand), cost, stop.signal).finally(() => {
            pool.leasing = undefined;
            pool.stopLease = undefined;
          });
          // Awaited by the waiters; one stopped after they all left is nobody's failure.
          leasing.catch(() => {});
          pool.leasing = leasing;
          pool.stopLease = stop;
        }
        await waitForLease(pool, signal);
      }
    } finally {
      pool.demand -= count - out.length;
    }
    leaseWait.observe({}, (Date.now() - started) / 1000);
    return out;
  }

  absorb({ status, cost, reading }: PacedAnswer): void {
    this.usedAt = Date.now();
    let urgent = false;
    // A successful answer that states no burst limit means the source announces none.
    const limit = reading.burstCapacity ?? (status >= 200 && status < 300 ? UNLIMITED : undefined);
    if (limit !== undefined && limit > 0 && limit !== this.known.capacity) {
      this.known.capacity = limit;
      this.pending.burstCapacity = limit;
      urgent = true;
    }
    if (reading.burstWindowMs !== undefined && reading.burstWindowMs > 0)
      this.known.windowMs = reading.burstWindowMs;
    const daily = reading.daily;
    if (
      daily &&
      (daily.spent ||
        daily.remaining !== this.known.dailyRemaining ||
        daily.resetAt !== this.known.dailyResetAt)
    ) {
      this.known.dailyRemaining = daily.remaining;
      this.known.dailyResetAt = daily.resetAt;
      this.pending.daily = {
        remaining: daily.remaining,
        resetAt: new Date(daily.resetAt),
        ...(daily.resetBy === "guess" ? { guessed: true } : {}),
        // A rule's reset is a hint the keeper checks against the source (absent means the rule).
        ...(daily.resetBy === "rule" || daily.resetBy === undefined ? { ruled: true } : {}),
        ...(daily.periodMs ? { periodMs: daily.periodMs } : {}),
      };
      urgent = true;
    }
    if (reading.dailyLimit !== undefined && reading.dailyLimit !== this.known.dailyLimit) {
      this.known.dailyLimit = reading.dailyLimit;
      this.pending.dailyLimit = reading.dailyLimit;
      urgent = true;
    }
    if (daily?.spent && reading.blockedUntil !== undefined) this.onAccountWall(reading.blockedUntil);
    if (reading.blockedUntil !== undefined) {
      if (status === 429) rateLimited.inc({ account: this.account.sourceAccount });
      // Never send again before the reset: drop what was leased before it, and tell the coordinator.
      this.blockedUntil = Math.max(this.blockedUntil, reading.blockedUntil);
      this.dropBefore(this.blockedUntil);
      this.pending.blockedUntil = new Date(this.blockedUntil);
      urgent = true;
    } else if (status > 0 && status < 500) {
      this.pending.spent += cost;
    }
    if (urgent || Date.now() - this.reportedAt > REPORT_EVERY_MS) void this.report();
  }

  wallUntil(): number {
    return this.blockedUntil;
  }

  /**
   * Slots handed out that will never be used (late, or before a wall): their tokens go back. Without
   * the earliest slot's instant, they go back only to a day that has not ended since this process
   * started (the keeper takes 0 for a slot of a day long over).
   */
  release(count: number, cost = 0, earliestSlot = 0): void {
    this.giveBack(count, cost, earliestSlot);
  }

  /**
   * Counts unused slots at the cost they were leased for, for the next report: the keeper counted
   * them off the day (and the run's share) when it granted them, and gives them back to that day
   * only, which is why the report says the earliest slot's instant.
   */
  private giveBack(count: number, cost: number, earliestSlot: number): void {
    if (count <= 0 || cost <= 0) return;
    this.pending.unused = (this.pending.unused ?? 0) + count * cost;
    const from = this.pending.unusedFrom?.getTime();
    if (from === undefined || earliestSlot < from) this.pending.unusedFrom = new Date(earliestSlot);
  }

  /**
   * Gives back every slot still held: the pacer is let go (its run idle for an hour) or its process
   * stops after its tasks drained, so none will be used. Left in the pool, the keeper would count
   * them spent for the rest of their day and grant the account (and the run's share) that much less.
   */
  returnHeld(): void {
    this.dropBefore(Number.POSITIVE_INFINITY);
  }

  /** Takes back every held slot before `until`, giving its tokens back. */
  private dropBefore(until: number): void {
    for (const [cost, pool] of this.pools) {
      const kept = pool.slots.filter((t) => t >= until);
      if (kept.length < pool.slots.length)
        this.giveBack(pool.slots.length - kept.length, cost, pool.slots[0]!);
      pool.slots = kept;
    }
  }

  /**
   * When the account may be asked again, as far as this process knows: its wall, else the reset of
   * a day it saw spent, else the first probe of a day whose reset nothing said.
   */
  private knownWall(): number {
    const now = Date.now();
    if (this.blockedUntil > now) return this.blockedUntil;
    if (this.known.dailyRemaining === 0 && (this.known.dailyResetAt ?? 0) > now)
      return this.known.dailyResetAt!;
    return now + FIRST_PROBE_MS;
  }

  /** Another worker hit a 429 on this account: nothing goes out before `until`. */
  wall(until: number): void {
    if (until <= this.blockedUntil) return;
    this.blockedUntil = until;
    this.dropBefore(until);
  }

  /** Sends what changed since the last report; a failed report keeps its readings for the next. */
  report(): Promise<void> {
    const p = this.takePending();
    if (!p) return this.reporting ?? Promise.resolve();
    const previous = this.reporting ?? Promise.resolve();
    this.reporting = previous
      .then(() => this.client.reportBudget(this.reportRequest(p), { deadline: new Date(Date.now() + 5_000) }))
      .then(
        () => undefined,
        () => this.restorePending(p),
      );
    return this.reporting;
  }

  /** The readings not yet reported, taken for a report; undefined when nothing changed. */
  private takePending(): BudgetReport | undefined {
    const p = this.pending;
    const hasNews =
      p.burstCapacity !== undefined ||
      p.daily !== undefined ||
      p.dailyLimit !== undefined ||
      p.blockedUntil !== undefined ||
      p.spent > 0 ||
      (p.unused ?? 0) > 0;
    if (!hasNews) return undefined;
    this.pending = { spent: 0 };
    this.reportedAt = Date.now();
    return p;
  }

  /** Readings whose report did not arrive go out with the next: newer readings win, increments add up. */
  private restorePending(p: BudgetReport): void {
    this.pending = {
      burstCapacity: this.pending.burstCapacity ?? p.burstCapacity,
      daily: this.pending.daily ?? p.daily,
      dailyLimit: this.pending.dailyLimit ?? p.dailyLimit,
      unused: (this.pending.unused ?? 0) + (p.unused ?? 0),
      unusedFrom: earlier(this.pending.unusedFrom, p.unusedFrom),
      blockedUntil: this.pending.blockedUntil ?? p.blockedUntil,
      spent: this.pending.spent + p.spent,
    };
  }

  private reportRequest(p: BudgetReport) {
    const { source, sourceAccount, workerId } = this.account;
    return budgetReportRequest({ source, sourceAccount, workerId, runId: this.runId }, p);
  }

  private async lease(pool: SlotPool, want: number, cost: number, signal?: AbortSignal): Promise<void> {
    if (this.blockedUntil > Date.now()) {
      if (this.blockedUntil - Date.now() > PARK_AFTER_MS) {
        throw new RateLimitedError(
          `${this.account.sourceAccount}: rate limited by the source`,
          new Date(this.blockedUntil),
        );
      }
      await sleep(this.blockedUntil - Date.now(), signal);
    }
    // What the headers said reaches the coordinator before it decides: a report still in flight
    // lands first, and what is not reported yet travels with the lease itself. Tokens of unused
    // slots go in a report of their own first: a lease may be cut short by its task's abort after
    // the leader applied it, and readings kept for the next call would then be counted twice —
    // harmless for the others, but tokens given back twice are slots granted beyond a run's share.
    if ((this.pending.unused ?? 0) > 0) await this.report();
    await this.reporting;
    for (let failures = 0; ; ) {
      let carried = this.takePending();
      try {
        const res = await this.client.leaseBudget(
          {
            source: this.account.source,
            sourceAccount: this.account.sourceAccount,
            workerId: this.account.workerId,
            want,
            tokensPerSlot: cost,
            burstWindowMs: this.known.windowMs ?? 0,
            runId: this.runId,
            ...(carried ? { report: this.reportRequest(carried) } : {}),
          },
          { deadline: new Date(Date.now() + 5_000), ...(signal ? { signal } : {}) },
        );
        // A coordinator that predates the field did not read them: they go out as a report.
        if (carried && !res.reportApplied) {
          this.restorePending(carried);
          void this.report();
        }
        carried = undefined;
        if (res.exhausted) {
          const at = res.retryAt ? timestampDate(res.retryAt).getTime() : this.knownWall();
          // Every task of this process on the account waits for it too, without asking again; a
          // run's spent share walls only that run's pacer.
          const scope = res.exhausted.scope === BudgetExhausted_Scope.RUN ? "run" : "account";
          if (scope === "account") this.onAccountWall(at);
          else this.wall(at);
          throw new RateLimitedError(res.exhausted.reason, new Date(at), { scope });
        }
        if (res.granted > 0 && res.firstSlotAt) {
          // Without it every slot would count as late and be swapped for another, for ever.
          if (!(res.graceMs > 0))
            throw new TransientError(
              "the coordinator's lease carries no grace_ms: it is older than this worker",
            );
          this.graceMs = res.graceMs;
          const first = timestampDate(res.firstSlotAt).getTime();
          for (let i = 0; i < res.granted; i++) pool.slots.push(first + i * res.intervalMs);
          return;
        }
        const retryAt = res.retryAt ? timestampDate(res.retryAt).getTime() : Date.now() + 500;
        if (retryAt - Date.now() > PARK_AFTER_MS) {
          throw new RateLimitedError(
            `${this.account.sourceAccount}: no budget before ${new Date(retryAt).toISOString()}`,
            new Date(retryAt),
          );
        }
        await sleep(Math.max(0, retryAt - Date.now()), signal);
      } catch (err) {
        // Readings the coordinator did not apply go out again with the next lease or report.
        if (carried) this.restorePending(carried);
        if (err instanceof RateLimitedError || err instanceof TransientError) throw err;
        if (isRpcError(err, Code.RESOURCE_EXHAUSTED)) {
          // A coordinator older than the `exhausted` field refused the lease instead: the account is
          // walled until what this worker already knows, its first probe at the latest.
          const at = this.knownWall();
          this.onAccountWall(at);
          throw new RateLimitedError(err.message, new Date(at));
        }
        if (signal?.aborted) throw err;
        // The coordinator is restarting or failing over: wait a little, then give the task back.
        if (++failures > 20)
          throw new TransientError(
            `no budget lease for ${this.account.sourceAccount}: ${(err as Error).message}`,
          );
        await sleep(500, signal);
      }
    }
  }
}

/** A run's pacer nobody used for this long is let go (its readings reported first). */
const IDLE_PACER_MS = 3_600_000;

/** The slots of one call cost, and the acquires waiting for them: one lease asks for all of them. */
interface SlotPool {
  slots: number[];
  demand: number;
  leasing: Promise<void> | undefined;
  /** Stops the lease in flight: only once none of the acquires waiting on it waits any more. */
  stopLease?: AbortController | undefined;
  /** Acquires waiting on the lease in flight. */
  waiters: number;
}

/**
 * Waits for the pool's lease, or for `signal`: a waiter that gives up leaves the lease to the
 * others, and the last to leave stops it.
 */
async function waitForLease(pool: SlotPool, signal: AbortSignal | undefined): Promise<void> {
  const leasing = pool.leasing!;
  const stop = pool.stopLease;
  pool.waiters++;
  try {
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(signal!.reason);
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      leasing.then(resolve, reject).finally(() => signal?.removeEventListener("abort", onAbort));
    });
  } finally {
    pool.waiters--;
    if (pool.waiters === 0 && signal?.aborted) stop?.abort(signal.reason);
  }
}

/** One LeasedBudgetPacer per source account and run in this process. */
export class BudgetLeases {
  private readonly pacers = new Map<string, LeasedBudgetPacer>();
  private sweptAt = Date.now();

  constructor(
    private readonly client: Pick<Client<typeof WorkerService>, "leaseBudget" | "reportBudget">,
    private readonly workerId: string,
  ) {}

  /** One pacer per account and run: a run's daily share is leased apart, the account's walls are shared. */
  for(source: string, sourceAccount: string, runId = ""): LeasedBudgetPacer {
    this.sweep();
    const key = `${source}\u0000${sourceAccount}\u0000${runId}`;
    let pacer = this.pacers.get(key);
    if (!pacer) {
      pacer = new LeasedBudgetPacer(
        this.client,
        { source, sourceAccount, workerId: this.workerId },
        runId,
        (until) => this.wall(source, sourceAccount, until),
      );
      this.pacers.set(key, pacer);
    }
    return pacer;
  }

  /** Applies a wall the coordinator announced (or a run's pacer met) to every pacer of the account. */
  wall(source: string, sourceAccount: string, until: number): void {
    const prefix = `${source}\u0000${sourceAccount}\u0000`;
    for (const [key, pacer] of this.pacers) if (key.startsWith(prefix)) pacer.wall(until);
  }

  /** Lets go of the pacers of runs idle for an hour (finished, or parked for the day), at most every 10 minutes. */
  private sweep(): void {
    const now = Date.now();
    if (now - this.sweptAt < IDLE_PACER_MS / 6) return;
    this.sweptAt = now;
    for (const [key, pacer] of this.pacers) {
      if (now - pacer.usedAt < IDLE_PACER_MS) continue;
      this.pacers.delete(key);
      pacer.returnHeld();
      void pacer.report();
    }
  }

  /** Flushes every account's unreported readings and unused slots (graceful shutdown, tasks drained). */
  async flush(): Promise<void> {
    await Promise.allSettled(
      [...this.pacers.values()].map((p) => {
        p.returnHeld();
        return p.report();
      }),
    );
  }
}

function earlier(a: Date | undefined, b: Date | undefined): Date | undefined {
  if (!a || !b) return a ?? b;
  return a.getTime() <= b.getTime() ? a : b;
}
