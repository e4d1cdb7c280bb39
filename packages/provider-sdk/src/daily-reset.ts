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

/**
 * Where a day's reset can fall when nothing states it: midnight in some time zone, and every zone's
 * offset from UTC is a whole half hour (a few, such as Nepal's +5:45, a quarter past one: their
 * reset is found at most a quarter of an hour late). 48 candidates a day, scaled with a shorter day.
 */
export const RESET_CANDIDATES_PER_DAY = 48;

/** The first reset candidate strictly after `after`: a multiple of dayMs / 48 since the epoch. */
export function nextResetCandidate(after: number, dayMs: number): number {
  const step = dayMs / RESET_CANDIDATES_PER_DAY;
  return (Math.floor(after / step) + 1) * step;
}

/** The first instant strictly after `after` that lies `phaseMs` past a multiple of dayMs since the epoch. */
export function nextResetAtPhase(after: number, phaseMs: number, dayMs: number): number {
  const phase = ((phaseMs % dayMs) + dayMs) % dayMs;
  return Math.floor((after - phase) / dayMs) * dayMs + phase + dayMs;
}

/** Where an instant lies within its day: ms past the last multiple of dayMs since the epoch. */
export function phaseOf(at: number, dayMs: number): number {
  return ((at % dayMs) + dayMs) % dayMs;
}

/** Building a formatter loads the zone's rules (most of its cost): one per time zone and process. */
const wallClocks = new Map<string, Intl.DateTimeFormat>();

function wallClock(timeZone: string): Intl.DateTimeFormat {
  let format = wallClocks.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    wallClocks.set(timeZone, format);
  }
  return format;
}

/**
 * The first midnight after `now` on the wall clock of `timeZone`: the documented daily reset of
 * both CRM sources (Pipedrive's company time zone, HubSpot's account time zone setting).
 */
export function nextMidnight(now: number, timeZone: string): number {
  const parts = wallClock(timeZone).formatToParts(new Date(now));
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const sinceMidnight = ((part("hour") * 60 + part("minute")) * 60 + part("second")) * 1000 + (now % 1000);
  return now - sinceMidnight + 86_400_000;
}
