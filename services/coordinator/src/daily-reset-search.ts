import { nextResetCandidate } from "@drover/provider-sdk";
import { nextResetAtPhase, phaseOf, RESET_CANDIDATES_PER_DAY } from "@drover/provider-sdk/engine";

/**
 * When an account's spent day returns, as the source shows it. Pipedrive resets a company's budget
 * at "midnight at server's timezone", which "may not be aligned" with the customer's, and its
 * refusal says nothing of when: an account's rule (`dailyReset`) is a hint. Waiting on a wrong rule
 * cost an outside measurement two thirds of every day, and a whole rule's day where the source's
 * days were shorter.
 *
 * So once the day is spent the keeper asks the source: one probe (one request, one worker) at
 * each half hour where some time zone's midnight falls, from the first after the spend, each
 * refused probe moving to the next: at most 48 refused a day, one request per half hour, never the
 * traffic after a 429 that draws Cloudflare's 403. The first probe admitted shows the reset came
 * since the last refused one: that candidate is the account's reset, kept in its budgets row (a new
 * leader reads it) and waited for on later days without probes. A learned reset the source refuses
 * (nothing admitted since it passed) sends the keeper searching again.
 */
export interface ResetSearch {
  /** When the day was found spent (or the last 48 probes refused). */
  since: number;
  /** Probes the source refused since then. */
  refused: number;
  /** The instant the next probe is due at. */
  dueAt: number;
  /** The instant of the slot granted for the probe (sent then); null while none is out. */
  grantedAt: number | null;
  probeAt: number;
  /** The source's last count of the day when the search began: an answer counting more shows a new day. */
  floor: number;
  /** The instant of the last probe refused, or of the spend: the reset came after it. */
  refusedAt: number;
  /** A probe inside a learned reset's window, to narrow it (see narrowingProbe). */
  narrowing?: boolean;
}

/** What the keeper knows of an account's day beyond its count. */
export interface AccountDay {
  /** The length of the account's day (ms), as its adapter knows it; null when none said. */
  dayMs: number | null;
  /** The learned reset: its phase within a day of learnedDayMs. */
  learnedPhaseMs: number | null;
  /**
   * The phase of the last instant the source was seen refusing before the learned reset: the real
   * reset lies between the two. Null when they are a candidate apart or less (the reset is known).
   */
  learnedAfterPhaseMs: number | null;
  learnedDayMs: number | null;
  search: ResetSearch | null;
  /** The source's last count of the day (not the keeper's, which runs below it by what it granted). */
  lastCount: number | null;
  /** When the source last admitted a call of this account, as reported. */
  admittedAt: number;
}

/** The learned reset after `after`, if one was learned for the account's current day length. */
export function learnedResetAfter(d: AccountDay, after: number): number | undefined {
  if (d.learnedPhaseMs === null || d.dayMs === null || d.learnedDayMs !== d.dayMs) return undefined;
  return nextResetAtPhase(after, d.learnedPhaseMs, d.dayMs);
}

/**
 * Whether the learned reset held for the day now spent: the source admitted a call since it last
 * passed. A refusal with nothing admitted since means the account's reset moved.
 */
export function learnedResetHeld(d: AccountDay, now: number): boolean {
  const next = learnedResetAfter(d, now);
  return next !== undefined && d.admittedAt >= next - d.dayMs!;
}

/** A search from `now`, the day found spent: its first probe at the next candidate not before `notBefore`. */
export function startSearch(d: AccountDay & { dayMs: number }, now: number, notBefore = now): ResetSearch {
  d.search = {
    since: now,
    refused: 0,
    dueAt: nextResetCandidate(Math.max(now, notBefore - 1), d.dayMs),
    grantedAt: null,
    probeAt: 0,
    floor: d.lastCount ?? 0,
    refusedAt: now,
  };
  return d.search;
}

/**
 * The probe out was refused: the next is due at the next candidate not before `notBefore` (the
 * refusal's wall), or, after 48 refused (a whole day of candidates, which no reset can escape), a
 * day after the search began.
 */
export function probeRefused(
  d: AccountDay & { dayMs: number; search: ResetSearch },
  now: number,
  notBefore = now,
): void {
  const s = d.search;
  s.grantedAt = null;
  s.refused++;
  s.refusedAt = s.probeAt;
  if (s.narrowing) {
    // The reset is later than this candidate: the window shrinks from below, and today's reset is
    // the learned one, waited for without another probe.
    d.learnedAfterPhaseMs = exactOrNull(d, phaseOf(Math.floor(s.probeAt), d.dayMs));
    (d as AccountDay).search = null;
    return;
  }
  if (s.refused >= RESET_CANDIDATES_PER_DAY) {
    s.since = Math.max(now, s.since + d.dayMs);
    s.refused = 0;
    s.dueAt = s.since;
  } else {
    // Not inside the refusal's Retry-After (`notBefore`): a shorter day's half hours can be shorter.
    s.dueAt = nextResetCandidate(Math.max(now, notBefore - 1), d.dayMs);
  }
}

/**
 * The probe out was admitted (counting `remaining`, where the answer said): the search is over. Its
 * instant is the account's reset when the source showed the day turn there: its count rose above
 * its last count of the spent day (a day's count only falls). A probe admitted on the same day (a
 * cheaper call than the one refused, or a day only the keeper's own count called spent), or with
 * no count, shows nothing. Returns whether a reset was learned.
 */
export function probeAdmitted(
  d: AccountDay & { dayMs: number; search: ResetSearch },
  remaining: number | undefined,
): boolean {
  const s = d.search;
  (d as AccountDay).search = null;
  // Without a count nothing shows the day turned: a refused probe before proves nothing, since the
  // one admitted may have been a cheaper call than the one refused, on the same spent day.
  const turned = remaining !== undefined && remaining > s.floor;
  if (!turned) return false;
  if (s.narrowing) {
    // The reset came at or before this probe: the window shrinks from above, never grows.
    const hi = nextResetAtPhase(s.probeAt - 1, d.learnedPhaseMs!, d.dayMs);
    const lo = hi - phaseOf(hi - (d.learnedAfterPhaseMs ?? hi), d.dayMs);
    d.learnedPhaseMs = phaseOf(Math.min(hi, onCandidate(s.probeAt, lo, d.dayMs)), d.dayMs);
    d.learnedAfterPhaseMs = exactOrNull(d, d.learnedAfterPhaseMs);
    return true;
  }
  d.learnedPhaseMs = phaseOf(onCandidate(s.probeAt, s.refusedAt, d.dayMs), d.dayMs);
  d.learnedDayMs = d.dayMs;
  d.learnedAfterPhaseMs = exactOrNull(d, phaseOf(Math.floor(s.refusedAt), d.dayMs));
  return true;
}

/**
 * Where a reset found by a probe admitted at `at`, the source refusing at `after`, came: on the last
 * candidate at or before `at` that is after `after` (a reset falls on a half hour; a probe sent late
 * is not the reset's instant), else at `at` itself (a whole ms).
 */
function onCandidate(at: number, after: number, dayMs: number): number {
  const step = dayMs / RESET_CANDIDATES_PER_DAY;
  const candidate = Math.floor(at / step) * step;
  return candidate > after ? candidate : Math.ceil(at);
}

/** The refused phase `after`, or null when it is within a candidate of the learned reset. */
function exactOrNull(d: AccountDay & { dayMs: number }, after: number | null): number | null {
  if (after === null || d.learnedPhaseMs === null) return null;
  const width = phaseOf(d.learnedPhaseMs - after, d.dayMs);
  return width <= d.dayMs / RESET_CANDIDATES_PER_DAY ? null : after;
}

/**
 * Where to try today for a learned reset whose window is wider than a candidate (its probes were
 * spaced by the refusals' Retry-After, as on a sandbox's short day): the candidate nearest the
 * middle of the window, if the day was spent before it. One probe a day halves the window; refused,
 * the learned reset is waited for as before. Undefined when there is nothing to narrow today.
 */
export function narrowingProbe(d: AccountDay, now: number): number | undefined {
  const hi = learnedResetAfter(d, now);
  if (hi === undefined || d.learnedAfterPhaseMs === null) return undefined;
  const dayMs = d.dayMs!;
  const width = phaseOf(d.learnedPhaseMs! - d.learnedAfterPhaseMs, dayMs);
  const lo = hi - width;
  let mid = nextResetCandidate(lo + width / 2 - dayMs / RESET_CANDIDATES_PER_DAY / 2, dayMs);
  if (mid >= hi) mid = nextResetCandidate(lo, dayMs);
  return mid > now && mid < hi ? mid : undefined;
}

/** A narrowing probe at `at` (see narrowingProbe). */
export function startNarrowing(d: AccountDay, at: number, now: number): ResetSearch {
  d.search = {
    since: now,
    refused: 0,
    dueAt: at,
    grantedAt: null,
    probeAt: 0,
    floor: d.lastCount ?? 0,
    refusedAt: now,
    narrowing: true,
  };
  return d.search;
}
