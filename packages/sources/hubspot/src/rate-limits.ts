import {
  type BudgetReading,
  dailyResetOf,
  nextMidnight,
  nextResetCandidate,
  type SourceAdapter,
  type SourceAnswer,
} from "@drover/provider-sdk";

/**
 * HubSpot's limits (developers.hubspot.com/docs/guides/apps/api-usage/usage-details): a rolling
 * 10-second window per app whose size is the account's tier (100 on Free and Starter, 190 on
 * Professional and Enterprise, 250 with the API add-on), stated on every answer but search's in
 * `X-HubSpot-RateLimit-Interval-Milliseconds`, `-Max` and `-Remaining`; and, for a private app, a
 * daily allowance of requests shared by the account's apps (`-Daily`, `-Daily-Remaining`), whole
 * again at midnight in the account's time zone. A 429 names the limit it hit in its body's
 * `policyName`; HubSpot sends no Retry-After.
 */
export type Policy = "TEN_SECONDLY_ROLLING" | "DAILY" | "SECONDLY";

/** The window HubSpot states in `-Interval-Milliseconds`; a refusal without headers (search's) waits this long. */
export const TEN_SECOND_WINDOW_MS = 10_000;
/** Search's own limit is per second: its refusal (policy SECONDLY) waits one second. */
const SECONDLY_WAIT_MS = 1_000;

export interface HubSpotLimitOptions {
  /**
   * The IANA zone of the account's day (its settings' time zone, from `GET /account-info/v3/details`):
   * the daily allowance returns at its midnight. Unknown: the day's end is probed from the next
   * half hour on, as for a Pipedrive day whose reset nothing states.
   */
  dailyResetTimeZone?: string | undefined;
  /** The account's day in seconds (a sandbox's is shorter); a day starts at multiples of it. */
  daySeconds?: number | undefined;
}

/** The `policyName` of a 429's body, or undefined when the body names none. */
export function refusalPolicy(body: string | undefined): Policy | undefined {
  if (!body) return undefined;
  try {
    const name = (JSON.parse(body) as { policyName?: unknown } | null)?.policyName;
    return name === "DAILY" || name === "TEN_SECONDLY_ROLLING" || name === "SECONDLY" ? name : undefined;
  } catch {
    return undefined;
  }
}

function intHeader(headers: Headers, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null) return undefined;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * HubSpot's API as the source client and the budget pacers need it: a bearer token, one unit of the
 * daily allowance per request (HubSpot counts requests, whatever they ask), and the readings above.
 */
export function hubspotAdapter(options: HubSpotLimitOptions = {}): SourceAdapter {
  const daySeconds = options.daySeconds ?? 86_400;
  const dayMs = daySeconds * 1000;
  const zone = options.dailyResetTimeZone;
  const rule = (now: number): number | undefined =>
    daySeconds !== 86_400
      ? Math.floor(now / dayMs) * dayMs + dayMs
      : zone === undefined
        ? undefined
        : nextMidnight(now, zone);
  return {
    authHeaders: (token) => ({ authorization: `Bearer ${token}` }),
    cost: () => 1,
    readBudget: (answer, cost, now) => readHubSpotBudget(answer, cost, now, { dayMs, rule }),
  };
}

function readHubSpotBudget(
  { status, headers, body }: SourceAnswer,
  _cost: number,
  now: number,
  day: { dayMs: number; rule: (now: number) => number | undefined },
): BudgetReading {
  const reading: BudgetReading = {};
  const max = intHeader(headers, "x-hubspot-ratelimit-max");
  const interval = intHeader(headers, "x-hubspot-ratelimit-interval-milliseconds");
  const remaining = intHeader(headers, "x-hubspot-ratelimit-remaining");
  const dailyLimit = intHeader(headers, "x-hubspot-ratelimit-daily");
  const dailyRemaining = intHeader(headers, "x-hubspot-ratelimit-daily-remaining");
  const windowMs = interval !== undefined && interval > 0 ? interval : TEN_SECOND_WINDOW_MS;
  if (max !== undefined) {
    reading.burstCapacity = max;
    reading.burstWindowMs = windowMs;
  }
  if (remaining !== undefined) {
    reading.burstRemaining = remaining;
    // The window rolls: no answer says when room returns. At the latest a whole window after now,
    // when every request counted in it has left it; a pacer that waits that long never meets a 429.
    reading.burstResetAt = now + windowMs;
  }
  if (dailyLimit !== undefined) reading.dailyLimit = dailyLimit;
  const policy = status === 429 ? refusalPolicy(body) : undefined;
  if (status === 429 && (policy === "DAILY" || (dailyRemaining !== undefined && dailyRemaining <= 0))) {
    const ruled = day.rule(now);
    const { resetAt, resetBy } = dailyResetOf({ rule: ruled }, now);
    reading.daily = { remaining: 0, resetAt, resetBy, spent: true, periodMs: day.dayMs };
    // The day is spent: nothing before its midnight, when the account's zone is known; else from
    // the next half hour where a midnight may fall, where the budget keeper's probes take over.
    reading.blockedUntil = ruled ?? nextResetCandidate(now, day.dayMs);
    return reading;
  }
  if (status === 429) reading.blockedUntil = now + (policy === "SECONDLY" ? SECONDLY_WAIT_MS : windowMs);
  // Stated only with a reset the account's rule gives: a guessed reset would let a pacer believe the
  // day returns within the half hour.
  const ruled = dailyRemaining === undefined ? undefined : day.rule(now);
  if (dailyRemaining !== undefined && ruled !== undefined)
    reading.daily = { remaining: dailyRemaining, resetAt: ruled, resetBy: "rule", periodMs: day.dayMs };
  return reading;
}
