import type { DailyResetSource } from "./source-adapter.js";

/** What is known of when a spent daily allowance returns, from each place that may say it. */
export interface DailyResetClues {
  /** A header that states the daily reset (epoch ms); not a burst window's reset header. */
  header?: number | undefined;
  /** The refusal's body (epoch ms). */
  body?: number | undefined;
  /** The account's documented rule, e.g. midnight in the company's time zone (epoch ms). */
  rule?: number | undefined;
}

/**
 * The first probe after a spent day whose reset nothing states, and the ceiling of its backoff: a
 * guess checks the source at most once an hour, however long the day turns out to be.
 */
export const FIRST_PROBE_MS = 60_000;
export const MAX_PROBE_MS = 3_600_000;

/**
 * When the daily allowance returns, in the order the sources are believed: a header that states
 * it, the refusal's own body, the account's documented rule; else a guess (`now + FIRST_PROBE_MS`)
 * that the budget keeper turns into probes with backoff. A reset already behind `now` says nothing.
 */
export function dailyResetOf(
  clues: DailyResetClues,
  now: number,
): { resetAt: number; resetBy: DailyResetSource } {
  for (const by of ["header", "body", "rule"] as const) {
    const at = clues[by];
    if (at !== undefined && Number.isFinite(at) && at > now) return { resetAt: at, resetBy: by };
  }
  return { resetAt: now + FIRST_PROBE_MS, resetBy: "guess" };
}

/** The wait before the next probe of a day whose reset is a guess: doubled each time, at most an hour. */
export function nextProbeDelayMs(previousMs: number | undefined, firstMs = FIRST_PROBE_MS): number {
  return previousMs === undefined ? firstMs : Math.min(MAX_PROBE_MS, Math.max(firstMs, previousMs * 2));
}
