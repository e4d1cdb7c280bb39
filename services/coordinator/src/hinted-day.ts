import type { DailyAllowance } from "@drover/proto";
import { metrics } from "@drover/telemetry";
import {
  type AccountDay,
  learnedResetAfter,
  learnedResetHeld,
  narrowingProbe,
  probeAdmitted,
  probeRefused,
  type ResetSearch,
  startNarrowing,
  startSearch,
} from "./daily-reset-search.js";

/**
 * The keeper's count of an account's day whose reset the source never states (Pipedrive's): the
 * counts its answers carry are believed, the reset the account's rule names is a hint, and where the
 * day returns is asked of the source (daily-reset-search.ts). These read and write the part of the
 * keeper's account state that says it (BudgetKeeper's AccountState).
 */

/** Where an account's daily reset comes from: its rule (a hint), a probe, the learned reset, the source. */
export type DailyResetBy = "rule" | "probe" | "learned" | "stated";

export interface HintedDay {
  dailyRemaining: number | null;
  dailyResetAt: number | null;
  /** The day's whole allowance, as the source last stated it. */
  dailyLimit: number | null;
  /** The day is known spent until then (a refusal said so, or the grants used it up): 0 when not. */
  spentUntil: number;
  /** Nothing is scheduled before then (a refusal's wall). */
  blockedUntil: number;
  nextSlotAt: number;
  /** Where dailyResetAt comes from; null before any daily reading. */
  resetBy: DailyResetBy | null;
  /** The day's length, its learned reset and the search for it (daily-reset-search.ts). */
  day: AccountDay;
  /** Changed since the last write; the daily count moved (written at once). */
  dirty: boolean;
  dailyMoved: boolean;
}

const learnedResets = metrics.counter(
  "drover_budget_daily_resets_learned_total",
  "Daily resets the keeper learned by probing the source",
  [],
);

/**
 * What a lease on an account whose day is spent and whose reset is only hinted gets: nothing before
 * the next probe, then one request (`probe`, its slot at the instant due), other leases waiting for
 * its answer; at a learned reset, a wait in the lane for its instant; undefined when the
 * account is not in that state (its count is not spent, or its reset was stated). Starts the search
 * when the keeper's own count spends the day before any refusal.
 *
 * Parked tasks are told to come back `earlyMs` before the instant, and the slot is placed on it: a
 * task parked until the instant itself reaches the keeper 0.5 to 1.8 s after it (the dispatcher's
 * pass, the claim, the lease; measured in test/e2e/daily-budget.test.ts), which both delayed the
 * day's first call and, for a probe, blurred the reset it found.
 */
export function spentDayLease(
  a: HintedDay,
  now: number,
  tokensPerSlot: number,
  timing: { answerMs: number; pollMs: number; earlyMs: number },
): { kind: "exhausted" | "wait"; retryAt: number } | { kind: "probe" | "reopen"; at: number } | undefined {
  const search = a.day.search;
  if (search !== null) {
    if (search.grantedAt !== null && now - search.grantedAt < timing.answerMs)
      return { kind: "wait", retryAt: now + timing.pollMs };
    if (search.dueAt - now > timing.earlyMs)
      return { kind: "exhausted", retryAt: search.dueAt - timing.earlyMs };
    return { kind: "probe", at: search.dueAt };
  }
  if (a.dailyRemaining === null || a.dailyRemaining >= Math.max(1, tokensPerSlot) || a.day.dayMs === null)
    return undefined;
  if (a.resetBy === "rule") {
    // Spent by the keeper's own count, and only the rule says when the day returns: ask the source.
    const first = startSearch(a.day as AccountDay & { dayMs: number }, now);
    spendUntil(a, first.dueAt, "probe");
    return spentDayLease(a, now, tokensPerSlot, timing);
  }
  if (a.resetBy !== "learned" || a.dailyResetAt === null || a.dailyResetAt <= now) return undefined;
  const narrowing = narrowingProbe(a.day, now);
  if (narrowing !== undefined) {
    // Spent before a learned reset whose window is still wide: one probe inside it today.
    spendUntil(a, startNarrowing(a.day, narrowing, now).dueAt, "probe");
    return spentDayLease(a, now, tokensPerSlot, timing);
  }
  if (a.spentUntil < a.dailyResetAt) spendUntil(a, a.dailyResetAt, "learned");
  if (a.dailyResetAt - now > timing.earlyMs)
    return { kind: "exhausted", retryAt: a.dailyResetAt - timing.earlyMs };
  // Woken early: the task waits in its lane for the instant, and the next lease opens the day.
  return { kind: "wait", retryAt: a.dailyResetAt };
}

/**
 * A daily reading whose reset is the account's rule or a guess, on an account whose day length is
 * known: its count is believed, its reset is not, and the source is asked instead
 * (daily-reset-search.ts). Returns the wall it puts up: none unless the day is refused.
 */
export function readHintedDay(a: HintedDay, daily: DailyAllowance, now: number, wall: number): number {
  const day = a.day as AccountDay & { dayMs: number };
  if (daily.remaining <= 0) {
    if (day.search !== null) {
      // The probe refused moves to the next candidate; another refusal of its round, or one that
      // comes before the probe's slot (a call of the spent day reported late), changes nothing.
      if (day.search.grantedAt !== null && now >= day.search.grantedAt)
        probeRefused(day as typeof day & { search: ResetSearch }, now, wall);
    } else if (learnedResetHeld(day, now)) {
      // The learned reset came today (a call was admitted since): the day is spent until the next,
      // or until a probe that narrows its window.
      const narrowing = narrowingProbe(day, now);
      if (narrowing === undefined) {
        spendUntil(a, learnedResetAfter(day, now)!, "learned");
        return a.dailyResetAt!;
      }
      startNarrowing(day, narrowing, now);
    } else {
      startSearch(day, now, wall);
    }
    // A narrowing probe refused ends its search: the learned reset is today's.
    if (day.search === null) spendUntil(a, learnedResetAfter(day, now)!, "learned");
    else spendUntil(a, day.search.dueAt, "probe");
    return a.dailyResetAt!;
  }
  if (day.search !== null) {
    // A count while searching: the probe's answer, or a late answer of the spent day (ignored).
    if (day.search.grantedAt === null || now < day.search.grantedAt) return 0;
    const learned = probeAdmitted(day as typeof day & { search: ResetSearch }, daily.remaining);
    dayReturned(a, learned, daily, now);
    return 0;
  }
  day.lastCount = daily.remaining;
  const learned = learnedResetAfter(day, now);
  // The learned reset beats the rule.
  const resetAt = learned ?? daily.resetAt.getTime();
  const before = [a.dailyRemaining, a.dailyResetAt];
  if (a.dailyRemaining !== null && a.dailyResetAt !== null && now < a.dailyResetAt) {
    // The same day: its count only falls (see report).
    a.dailyRemaining = Math.min(daily.remaining, a.dailyRemaining);
    a.dailyResetAt = Math.min(resetAt, a.dailyResetAt);
  } else {
    a.dailyRemaining = daily.remaining;
    a.dailyResetAt = resetAt;
  }
  a.resetBy = learned !== undefined ? "learned" : "rule";
  if (a.dailyRemaining !== before[0] || a.dailyResetAt !== before[1]) a.dailyMoved = true;
  a.dirty = true;
  return 0;
}

/** A probe was admitted: the day is back, until the learned reset if one was learned, else the rule's. */
export function dayReturned(
  a: HintedDay,
  learned: boolean,
  daily: DailyAllowance | undefined,
  now: number,
): void {
  const next = learnedResetAfter(a.day, now);
  if (daily) a.day.lastCount = daily.remaining;
  a.dailyRemaining = daily ? daily.remaining : null;
  a.dailyResetAt = next ?? (daily ? daily.resetAt.getTime() : null);
  a.resetBy = next !== undefined ? "learned" : "rule";
  a.spentUntil = 0;
  a.blockedUntil = Math.min(a.blockedUntil, now);
  a.nextSlotAt = Math.min(a.nextSlotAt, now);
  a.dirty = true;
  a.dailyMoved = true;
  if (learned) learnedResets.inc({});
}

/** The day is spent until `until` (a probe's instant or the learned reset): said in GetRun at once. */
export function spendUntil(a: HintedDay, until: number, by: DailyResetBy): void {
  a.dailyRemaining = 0;
  a.dailyResetAt = until;
  a.spentUntil = until;
  a.resetBy = by;
  a.dirty = true;
  a.dailyMoved = true;
}
