import { type BudgetRow, budgets, type Db, runs } from "@drover/db";
import type { BudgetReport } from "@drover/proto";
import { FIRST_PROBE_MS, nextProbeDelayMs, RESET_CANDIDATES_PER_DAY } from "@drover/provider-sdk/engine";
import { metrics } from "@drover/telemetry";
import { and, eq, sql } from "drizzle-orm";
import { type AccountDay, probeAdmitted, type ResetSearch } from "./daily-reset-search.js";
import { dayReturned, type HintedDay, readHintedDay, spentDayLease } from "./hinted-day.js";

/**
 * The source accounts' allowances, kept by the leader coordinator in memory and written to the
 * budgets row only now and then: the row was the hottest in the database when every response and
 * every lease wrote it (every worker's every call queued on one row lock). Grants are schedules, not counts:
 *
 * Every slot granted for an account is spaced `interval` apart on one timeline, and a worker may
 * use slot i from its time until `graceMs` after it. Any rolling window of `windowMs` then holds at
 * most floor((windowMs + graceMs) / interval) + 1 requests, so with
 * interval = (windowMs + graceMs) / (capacity - 1) the source's burst window is never exceeded,
 * however many workers share the account, and a saturated account runs at
 * (capacity - 1) / capacity × windowMs / (windowMs + graceMs) of its allowance.
 */

export interface BudgetOptions {
  /** How late after its time a slot may still be used (covers timer and event-loop delay). */
  graceMs: number;
  /** How far ahead of now a lease may place slots. */
  horizonMs: number;
  /**
   * The earliest a slot is placed after now: the grant still has to travel to the worker, and a
   * slot that arrives already past its grace is wasted (given back, and leased again). 2 ms with
   * 40 ms of grace covers a grant 42 ms late; it is also what a task reading pages one after
   * another on an idle account waits per page (25 ms cost a re-run ~1 s in 3, 10 ms ~0.2 s in 2).
   */
  leadMs: number;
  /** At most one row write per account this often, unless the daily counter moved. */
  persistEveryMs: number;
  /** Used until the source's own answers say otherwise: a cautious 20 per 2 s. */
  defaultCapacity: number;
  /** The burst window capacity counts over, until a lease says the source's (its adapter knows it). */
  windowMs: number;
  /** The first probe of a spent day whose reset nothing stated; each probe that finds it spent doubles it, up to an hour. */
  firstProbeMs: number;
  /** How long a worker's probe may take to come back before the worker may probe again. */
  probeAnswerMs: number;
}

/**
 * How long a call may take to reach the source after its slot's grace, for a share's day end: a busy
 * worker's event loop (a page parsed, a window built) can hold a call between its slot and the
 * socket for a good part of this. 50 ms let a call sent in time land in the next day in CI. A share
 * loses at most this much of its day's end; a real day is 24 hours.
 */
const SHARE_DAY_TRANSIT_MS = 250;

/** How soon a lease waiting for a probe's answer asks again: the run resumes this soon after it. */
const PROBE_POLL_MS = 250;

export const DEFAULT_BUDGET_OPTIONS: BudgetOptions = {
  graceMs: 40,
  horizonMs: 1_000,
  leadMs: 2,
  persistEveryMs: 60_000,
  defaultCapacity: 20,
  windowMs: 2_000,
  firstProbeMs: FIRST_PROBE_MS,
  probeAnswerMs: 30_000,
};

/**
 * A lease's answer. A grant is a schedule (the first slot's instant in epoch ms, then one every
 * `intervalMs`); a refusal says when to ask again, as every "not before" inside Drover is said: a
 * Date (a Timestamp on the wire).
 */
export type LeaseResult =
  | { kind: "granted"; granted: number; firstSlotAt: number; intervalMs: number; graceMs: number }
  | { kind: "wait"; retryAt: Date }
  /** The account's day is spent, or (`share`) the run's share of it: nothing before retryAt. */
  | { kind: "exhausted"; retryAt: Date; share?: boolean };

/** The keeper's arithmetic, in epoch ms; turned into a LeaseResult at the lease's edge. */
type LeaseAt =
  | Extract<LeaseResult, { kind: "granted" }>
  | { kind: "wait"; retryAt: number }
  | { kind: "exhausted"; retryAt: number; share?: boolean };

interface AccountState extends HintedDay {
  id: number;
  capacity: number;
  windowMs: number;
  /** The backoff of the current probe, while the day's reset is a guess; null when it is not. */
  probeDelayMs: number | null;
  /** Workers given their one probe since the guessed reset passed, with when. */
  probedBy: Map<string, number>;
  /** Tokens granted to each run with a daily share on the day that ends at shareDayEndsAt. */
  runGranted: Map<string, number>;
  shareDayEndsAt: number;
  /**
   * From when unused slots are given back to that day: its start once a day ended under this leader,
   * else when this leader loaded the account (what an earlier leader granted stays spent).
   */
  shareDayStartedAt: number;
  /** runGranted changed since the last write: written at the next pass, for a leader taking over. */
  sharesMoved: boolean;
  spentDelta: number;
  persistedAt: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const remainingGauge = metrics.gauge(
  "drover_budget_daily_remaining",
  "Token units left in the source account's daily allowance",
  ["account"],
);
const grantedCounter = metrics.counter(
  "drover_budget_slots_granted_total",
  "Request slots granted to workers",
  ["account"],
);
const waitsCounter = metrics.counter(
  "drover_budget_lease_waits_total",
  "Leases answered with a time to come back",
  ["account"],
);

export class BudgetKeeper {
  private readonly accounts = new Map<string, Promise<AccountState>>();
  private readonly shares = new Map<string, Promise<number | null>>();
  /** When this process began granting: a previous leader's grants reach at most a horizon past it. */
  private grantingSince: number;

  constructor(
    private readonly db: Db,
    private readonly options: BudgetOptions = DEFAULT_BUDGET_OPTIONS,
    private readonly now: () => number = Date.now,
    /** Called when an account is walled off by a refusal, so workers drop the slots they already hold. */
    private readonly onWall: (source: string, account: string, until: number) => void = () => {},
  ) {
    this.grantingSince = now();
  }

  intervalMs(capacity: number, windowMs = this.options.windowMs): number {
    const { graceMs } = this.options;
    return capacity > 1 ? (windowMs + graceMs) / (capacity - 1) : windowMs + graceMs;
  }

  /**
   * `burstWindowMs` is the window the source counts its capacity over; 0 when the worker does not
   * know. `runId` names the run the slots are for (its daily share caps them), `workerId` the asking
   * process (one probe each while the day's reset is a guess).
   *
   * One function, over 80 lines, on purpose: the day, the run's share, the probe and the burst
   * schedule are decided together with no await between them, so no other lease or report can
   * slip in between a check and the grant it allows.
   */
  async lease(
    source: string,
    account: string,
    want: number,
    tokensPerSlot: number,
    burstWindowMs = 0,
    runId = "",
    workerId = "",
  ): Promise<LeaseResult> {
    const at = await this.leaseAt(source, account, want, tokensPerSlot, burstWindowMs, runId, workerId);
    return at.kind === "granted" ? at : { ...at, retryAt: new Date(at.retryAt) };
  }

  private async leaseAt(
    source: string,
    account: string,
    want: number,
    tokensPerSlot: number,
    burstWindowMs: number,
    runId: string,
    workerId: string,
  ): Promise<LeaseAt> {
    const a = await this.account(source, account);
    const share = runId ? await this.shareOf(runId) : null;
    if (burstWindowMs > 0) a.windowMs = burstWindowMs;
    const now = this.now();
    this.rollShareDay(a, now);
    const hinted = spentDayLease(a, now, tokensPerSlot, {
      answerMs: this.probeAnswerMs(a),
      pollMs: PROBE_POLL_MS,
      earlyMs: this.options.horizonMs,
    });
    if (hinted?.kind === "exhausted" || hinted?.kind === "wait") return hinted;
    // The day is spent and its reset unknown: one request of one worker, whatever the count says.
    const probing = hinted?.kind === "probe";
    const search = a.day.search;
    // No slot before the probe's instant.
    const notBefore = hinted?.kind === "probe" ? hinted.at : 0;
    if (probing) want = 1;
    else if (a.dailyRemaining !== null && a.dailyRemaining < Math.max(1, tokensPerSlot)) {
      if (a.dailyResetAt !== null && a.dailyResetAt > now) {
        if (a.spentUntil < a.dailyResetAt) {
          // Known spent from here on: said in GetRun, and written at once for a successor leader.
          a.spentUntil = a.dailyResetAt;
          a.dirty = true;
          a.dailyMoved = true;
        }
        return { kind: "exhausted", retryAt: a.dailyResetAt };
      }
      // The reset passed: the allowance is back until the source says otherwise.
      a.dailyRemaining = null;
      a.probedBy.clear();
    }
    if (a.probeDelayMs !== null && !probing) {
      // The reset was a guess: each worker may send one request to find out, and waits for its answer.
      const probed = a.probedBy.get(workerId);
      if (probed !== undefined && now - probed < this.options.probeAnswerMs)
        return { kind: "wait", retryAt: now + Math.min(2_000, this.options.probeAnswerMs) };
      a.probedBy.set(workerId, now);
      want = 1;
    }
    if (share !== null && a.dailyLimit !== null && tokensPerSlot > 0) {
      const left = Math.floor((share * a.dailyLimit - (a.runGranted.get(runId) ?? 0)) / tokensPerSlot);
      if (left < 1) {
        return {
          kind: "exhausted",
          retryAt: a.shareDayEndsAt > now ? a.shareDayEndsAt : now + this.options.firstProbeMs,
          share: true,
        };
      }
      want = Math.min(want, left);
    }
    const interval = this.intervalMs(a.capacity, a.windowMs);
    const start = Math.max(now + this.options.leadMs, a.nextSlotAt, a.blockedUntil, notBefore);
    const reach = now + this.options.leadMs + this.options.horizonMs;
    if (start > reach) {
      if (a.probeDelayMs !== null) a.probedBy.delete(workerId);
      waitsCounter.inc({ account });
      return { kind: "wait", retryAt: start - this.options.leadMs - this.options.horizonMs };
    }
    let granted = Math.min(Math.max(1, want), Math.floor((reach - start) / interval) + 1);
    if (share !== null && a.shareDayEndsAt > 0) {
      // A share is counted per day as the source counts it, by when the call arrives: no slot of
      // today's share lands in tomorrow. A slot may be used up to its grace late and its call still
      // travels, so the last one is placed that much before the day ends (a call sent at a slot
      // just before the reset arrived after it, and the next day counted it over the share).
      const lastSlot = a.shareDayEndsAt - this.options.graceMs - SHARE_DAY_TRANSIT_MS;
      if (start > lastSlot) return { kind: "wait", retryAt: a.shareDayEndsAt };
      granted = Math.min(granted, Math.floor((lastSlot - start) / interval) + 1);
    }
    if (probing) {
      // The reset came at or before the instant the probe is sent: its candidate, unless a wall (or
      // a burst schedule) pushed the slot further than a lead past it.
      // Its answer is awaited from its slot's instant, which may be ahead.
      search!.grantedAt = start;
      search!.probeAt = start - search!.dueAt > this.options.leadMs ? start : search!.dueAt;
    } else if (a.dailyRemaining !== null && tokensPerSlot > 0) {
      granted = Math.min(granted, Math.floor(a.dailyRemaining / tokensPerSlot));
      a.dailyRemaining -= granted * tokensPerSlot;
    }
    if (share !== null) {
      a.runGranted.set(runId, (a.runGranted.get(runId) ?? 0) + granted * tokensPerSlot);
      a.sharesMoved = true;
      a.dirty = true;
    }
    a.nextSlotAt = start + granted * interval;
    grantedCounter.inc({ account }, granted);
    return {
      kind: "granted",
      granted,
      firstSlotAt: start,
      intervalMs: interval,
      graceMs: this.options.graceMs,
    };
  }

  /**
   * What a worker read from the source's answers: only the readings that changed, spent as an
   * increment. Over 80 lines for the reason lease is: each reading is applied with no await, so a
   * lease never sees half a report.
   */
  // biome-ignore lint/complexity/noExcessiveLinesPerFunction: every reading is applied without an await between, so no lease sees half a report (see above)
  async report(source: string, account: string, r: BudgetReport, runId = ""): Promise<void> {
    const a = await this.account(source, account);
    if (r.burstCapacity !== undefined && r.burstCapacity > 0 && r.burstCapacity !== a.capacity) {
      a.capacity = r.burstCapacity;
      a.dirty = true;
      // Written at the next pass, like a moved daily counter: workers report a capacity only when it
      // changes, so a successor leader that read the default from the row would pace by it for good.
      a.dailyMoved = true;
    }
    const now = this.now();
    let blockedUntil = r.blockedUntil?.getTime() ?? 0;
    if (r.dailyLimit !== undefined && r.dailyLimit > 0) a.dailyLimit = r.dailyLimit;
    if (r.daily?.periodMs) a.day.dayMs = r.daily.periodMs;
    const dailyRefused = r.daily !== undefined && r.daily.remaining <= 0;
    if (r.daily && (r.daily.ruled || r.daily.guessed) && a.day.dayMs !== null) {
      blockedUntil = Math.max(blockedUntil, readHintedDay(a, r.daily, now, blockedUntil));
      remainingGauge.set({ account }, a.dailyRemaining ?? r.daily.remaining);
    } else if (
      r.spent > 0 &&
      !dailyRefused &&
      a.day.search?.grantedAt != null &&
      now >= a.day.search.grantedAt
    ) {
      // The probe came back admitted without a daily count (the headers may be missing a while).
      const learned = probeAdmitted(a.day as AccountDay & { dayMs: number; search: ResetSearch }, undefined);
      dayReturned(a, learned, undefined, now);
    } else if (r.daily) {
      const { remaining, guessed } = r.daily;
      let resetAt = r.daily.resetAt.getTime();
      const before = [a.dailyRemaining, a.dailyResetAt];
      if (guessed && a.probeDelayMs !== null && a.dailyResetAt !== null && a.dailyResetAt > now) {
        // Another worker's refusal of the same round: the next probe is already scheduled.
        blockedUntil = Math.max(blockedUntil, a.dailyResetAt);
      } else if (guessed) {
        // Nothing said when the day returns: probe then, later each time the probe finds it spent.
        a.probeDelayMs = nextProbeDelayMs(a.probeDelayMs ?? undefined, this.options.firstProbeMs);
        a.probedBy.clear();
        resetAt = now + a.probeDelayMs;
        a.dailyRemaining = 0;
        a.dailyResetAt = resetAt;
        blockedUntil = Math.max(blockedUntil, resetAt);
      } else if (resetAt <= now) {
        // A reading of a day that is already over says nothing of this one.
      } else if (a.dailyRemaining !== null && a.dailyResetAt !== null && now < a.dailyResetAt) {
        // The same day: its count only falls, whatever order the workers' reports arrive in, and
        // the keeper's own count already holds what it granted and the source has not seen yet.
        a.dailyRemaining = Math.min(remaining, a.dailyRemaining);
        a.dailyResetAt = Math.min(resetAt, a.dailyResetAt);
      } else {
        a.dailyRemaining = remaining;
        a.dailyResetAt = resetAt;
      }
      if (!guessed && remaining > 0 && a.probeDelayMs !== null) {
        // The source counts a day again: the guessing is over.
        a.probeDelayMs = null;
        a.probedBy.clear();
      }
      if (a.dailyRemaining !== before[0] || a.dailyResetAt !== before[1]) a.dailyMoved = true;
      if (r.daily.remaining <= 0 && a.dailyResetAt !== null && a.dailyResetAt > now) {
        a.spentUntil = a.dailyResetAt;
        blockedUntil = Math.max(blockedUntil, a.dailyResetAt);
      }
      a.dirty = true;
      remainingGauge.set({ account }, a.dailyRemaining ?? remaining);
    } else if (r.spent > 0 && a.probeDelayMs !== null) {
      // A probe came back answered: the day's allowance is back, and the guessing is over.
      a.probeDelayMs = null;
      a.probedBy.clear();
      a.dailyRemaining = null;
      a.spentUntil = 0;
      a.dailyMoved = true;
    }
    if (blockedUntil > a.blockedUntil) {
      // A refusal (a 429, a spent day, or a throttling the source's adapter recognised): nothing
      // more is scheduled before the source's reset.
      a.blockedUntil = blockedUntil;
      a.nextSlotAt = Math.max(a.nextSlotAt, a.blockedUntil);
      a.dirty = true;
      this.onWall(source, account, a.blockedUntil);
    }
    if (r.spent > 0) {
      a.spentDelta += r.spent;
      a.dirty = true;
      if (!dailyRefused) a.day.admittedAt = now;
    }
    if (r.unused !== undefined && r.unused > 0) {
      // Granted slots that went unused: counted off the day at the grant, they are the day's again
      // (and the run's share's); the source's next count still caps what the keeper believes. Only
      // the day they were granted in gets them back: slots a worker found late after the reset
      // (a parked task holds its slots across it) once lowered the new day's count of the run's
      // share, and the run spent that much over its share of the new day.
      this.rollShareDay(a, now);
      const ofThisDay = (r.unusedFrom?.getTime() ?? 0) >= a.shareDayStartedAt;
      if (ofThisDay && a.dailyRemaining !== null && a.spentUntil <= now) a.dailyRemaining += r.unused;
      if (ofThisDay && runId && a.runGranted.has(runId)) {
        a.runGranted.set(runId, Math.max(0, a.runGranted.get(runId)! - r.unused));
        a.sharesMoved = true;
        a.dirty = true;
      }
    }
  }

  /**
   * How long a probe may take to come back before another is granted: a day's 48th at most (a lost
   * probe delays the search by one candidate), and at least a second for the answer to travel.
   */
  private probeAnswerMs(a: AccountState): number {
    const step = (a.day.dayMs ?? 0) / RESET_CANDIDATES_PER_DAY;
    return Math.min(this.options.probeAnswerMs, Math.max(1_000, step));
  }

  /**
   * Writes the accounts whose state changed, at most once per persistEveryMs each, or at once
   * when the daily counter or a run's share moved (another coordinator taking over must not believe
   * in tokens that are gone). Only this process writes the row while it leads. What was granted
   * after the last write is lost with a leader that dies (not one that stops: it writes on its way
   * out): at most one reaper interval of grants.
   */
  async persist(force = false): Promise<number> {
    let written = 0;
    for (const pending of this.accounts.values()) {
      const a = await pending.catch(() => undefined);
      if (!a?.dirty) continue;
      if (
        !force &&
        !a.dailyMoved &&
        !a.sharesMoved &&
        this.now() - a.persistedAt < this.options.persistEveryMs
      )
        continue;
      const delta = a.spentDelta;
      a.spentDelta = 0;
      a.dirty = false;
      a.dailyMoved = false;
      a.sharesMoved = false;
      a.persistedAt = this.now();
      await this.db
        .update(budgets)
        .set({
          burstCapacity: a.capacity,
          burstResetAt: a.blockedUntil > 0 ? new Date(a.blockedUntil) : null,
          dailyRemaining: a.dailyRemaining,
          dailyResetAt: a.dailyResetAt === null ? null : new Date(a.dailyResetAt),
          exhaustedAt:
            a.spentUntil > this.now() || (a.dailyRemaining !== null && a.dailyRemaining <= 0)
              ? new Date()
              : null,
          spent: sql`${budgets.spent} + ${delta}`,
          shareDayEndsAt: a.shareDayEndsAt > 0 ? new Date(a.shareDayEndsAt) : null,
          shareGranted: Object.fromEntries(a.runGranted),
          dailyResetPhaseMs: a.day.learnedPhaseMs,
          dailyResetAfterMs: a.day.learnedAfterPhaseMs,
          dailyPeriodMs: a.day.learnedDayMs ?? a.day.dayMs,
          dailyResetBy: a.resetBy,
          updatedAt: new Date(),
        })
        .where(eq(budgets.id, a.id));
      written++;
    }
    return written;
  }

  /** Forgets everything: leadership changed hands, and the rows are read afresh. */
  clear(): void {
    this.accounts.clear();
    this.grantingSince = this.now();
  }

  /** A run's daily share, read once per run (it is fixed at StartRun); null for none or no such run. */
  private shareOf(runId: string): Promise<number | null> {
    let share = this.shares.get(runId);
    if (!share) {
      share = UUID.test(runId)
        ? this.db
            .select({ share: runs.dailyShare })
            .from(runs)
            .where(eq(runs.id, runId))
            .then(([row]) => row?.share ?? null)
        : Promise.resolve(null);
      this.shares.set(runId, share);
      share.catch(() => this.shares.delete(runId));
    }
    return share;
  }

  /** A new day (the account's reset passed) starts every run's share afresh. */
  private rollShareDay(a: AccountState, now: number): void {
    if (a.shareDayEndsAt > 0 && now >= a.shareDayEndsAt) {
      a.runGranted.clear();
      a.shareDayStartedAt = a.shareDayEndsAt;
      a.shareDayEndsAt = 0;
    }
    if (a.shareDayEndsAt === 0 && a.dailyResetAt !== null && a.dailyResetAt > now)
      a.shareDayEndsAt = a.dailyResetAt;
  }

  private account(source: string, account: string): Promise<AccountState> {
    const key = `${source}\u0000${account}`;
    let state = this.accounts.get(key);
    if (!state) {
      state = this.load(source, account);
      this.accounts.set(key, state);
      state.catch(() => this.accounts.delete(key));
    }
    return state;
  }

  private async load(source: string, account: string): Promise<AccountState> {
    let [row] = await this.db
      .select()
      .from(budgets)
      .where(and(eq(budgets.source, source), eq(budgets.sourceAccount, account)));
    if (!row) {
      await this.db
        .insert(budgets)
        .values({ source, sourceAccount: account, burstCapacity: this.options.defaultCapacity })
        .onConflictDoNothing();
      [row] = await this.db
        .select()
        .from(budgets)
        .where(and(eq(budgets.source, source), eq(budgets.sourceAccount, account)));
    }
    const now = this.now();
    const blocked = row!.burstResetAt?.getTime() ?? 0;
    // The day the last leader counted shares for, if it is still today: its grants stand.
    const shareDayEndsAt = row!.shareDayEndsAt?.getTime() ?? 0;
    const sharesToday = shareDayEndsAt > now;
    return {
      id: row!.id,
      capacity: row!.burstCapacity,
      // Not kept in the row: every lease that knows it says it again.
      windowMs: this.options.windowMs,
      // A new leader does not know what the last one scheduled, at most a horizon past its own start.
      nextSlotAt: Math.max(now, this.grantingSince + this.options.horizonMs),
      blockedUntil: blocked > now ? blocked : 0,
      dailyRemaining: row!.dailyRemaining,
      dailyResetAt: row!.dailyResetAt?.getTime() ?? null,
      dailyLimit: null,
      spentUntil:
        row!.exhaustedAt && (row!.dailyResetAt?.getTime() ?? 0) > now ? row!.dailyResetAt!.getTime() : 0,
      probeDelayMs: null,
      probedBy: new Map(),
      day: loadedDay(row!, now),
      resetBy: row!.dailyResetBy ?? null,
      runGranted: new Map(sharesToday ? Object.entries(row!.shareGranted) : []),
      shareDayEndsAt: sharesToday ? shareDayEndsAt : 0,
      shareDayStartedAt: now,
      sharesMoved: false,
      spentDelta: 0,
      dirty: false,
      dailyMoved: false,
      persistedAt: now,
    };
  }
}

/**
 * The account's day as the last leader left it in the row: its length and learned reset, and the
 * search it was in (a spent day waiting for a probe goes on probing from the instant written).
 */
function loadedDay(row: BudgetRow, now: number): AccountDay {
  const dayMs = row.dailyPeriodMs ?? null;
  const day: AccountDay = {
    dayMs,
    learnedPhaseMs: row.dailyResetPhaseMs ?? null,
    learnedAfterPhaseMs: row.dailyResetAfterMs ?? null,
    learnedDayMs: row.dailyResetPhaseMs !== null ? dayMs : null,
    search: null,
    lastCount: null,
    // A new leader takes the learned reset as holding today: the last one would have searched otherwise.
    admittedAt: now,
  };
  const dueAt = row.dailyResetAt?.getTime();
  if (dayMs !== null && row.dailyResetBy === "probe" && row.exhaustedAt && dueAt !== undefined)
    day.search = {
      since: now,
      refused: 0,
      dueAt: Math.max(now, dueAt),
      grantedAt: null,
      probeAt: 0,
      floor: row.dailyRemaining ?? 0,
      refusedAt: now,
    };
  return day;
}
