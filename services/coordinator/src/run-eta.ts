import type { WorkEstimate } from "@drover/provider-sdk";

/**
 * A live run's ETA against its source account's budget: the requests and tokens it still needs
 * (the provider's estimate from what the run learned) paced by the burst window and, when they do
 * not fit in what is left of today's allowance, waiting for as many daily resets as the rest needs.
 * The time the workers spend writing is not counted: on a metered account the budget is the wall.
 */

/** The account's budget as the coordinator last recorded it. */
export interface BudgetState {
  /** The keeper's pace on the account: one request per this many ms (its burst window's schedule). */
  slotIntervalMs: number;
  /** Tokens left today, when the source has said; undefined otherwise. */
  dailyRemaining?: number | undefined;
  dailyResetAt?: Date | undefined;
  /** The account's daily allowance, when known (the run's settings). */
  dailyTokens?: number | undefined;
  /** A wall in force: nothing goes out before it. */
  blockedUntil?: Date | undefined;
}

export interface Eta {
  seconds: number;
  requests: number;
  tokens: number;
  /** Daily resets the rest of the run waits for. */
  dailyResets: number;
  /** Part of the work is not known yet: the run takes at least this long. */
  atLeast: boolean;
  /** "about 2 days 5 hours" ("at least about ..." when atLeast). */
  text: string;
}

const DAY_MS = 86_400_000;

export function estimateEta(work: WorkEstimate, budget: BudgetState, now: Date): Eta {
  const requests = work.kinds.reduce((n, k) => n + k.requests, 0);
  const tokens = work.kinds.reduce((n, k) => n + k.tokens, 0);
  const atLeast = work.kinds.some((k) => k.atLeast);
  const pace = (n: number) => n * budget.slotIntervalMs;
  const start = Math.max(now.getTime(), budget.blockedUntil?.getTime() ?? 0);
  let end = start + pace(requests);
  let dailyResets = 0;
  const remaining = budget.dailyRemaining;
  if (remaining !== undefined && tokens > remaining && budget.dailyResetAt) {
    // Today's tokens go first; then each reset gives a day's allowance (or, unknown, what is left
    // today again: a guess the operator improves by stating the allowance).
    const perDay = Math.max(1, budget.dailyTokens ?? remaining);
    const afterToday = tokens - remaining;
    dailyResets = Math.ceil(afterToday / perDay);
    const lastDayTokens = afterToday - (dailyResets - 1) * perDay;
    const lastReset = Math.max(budget.dailyResetAt.getTime(), start) + (dailyResets - 1) * DAY_MS;
    end = Math.max(
      start + pace((requests * remaining) / tokens),
      lastReset + pace((requests * lastDayTokens) / tokens),
    );
  }
  const seconds = Math.max(0, Math.round((end - now.getTime()) / 1000));
  return {
    seconds,
    requests,
    tokens,
    dailyResets,
    atLeast,
    text: `${atLeast ? "at least " : ""}${formatAbout(seconds)}`,
  };
}

/** "about 2 days 5 hours", "about 3 hours 12 minutes", "about 4 minutes", "under a minute": two units at most. */
export function formatAbout(seconds: number): string {
  if (seconds < 60) return "under a minute";
  const unit = (n: number, name: string) => (n === 0 ? [] : [`${n} ${name}${n === 1 ? "" : "s"}`]);
  const minutes = Math.round(seconds / 60);
  // The smaller unit is rounded, the larger one follows it (12 h 33 min after two days: 2 days 13 hours).
  if (minutes >= 1_440) {
    const hours = Math.round(minutes / 60);
    return `about ${[...unit(Math.floor(hours / 24), "day"), ...unit(hours % 24, "hour")].join(" ")}`;
  }
  if (minutes >= 60)
    return `about ${[...unit(Math.floor(minutes / 60), "hour"), ...unit(minutes % 60, "minute")].join(" ")}`;
  return `about ${unit(minutes, "minute").join(" ")}`;
}
