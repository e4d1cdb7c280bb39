import {
  type BudgetPacer,
  type BudgetReading,
  dailyResetOf,
  HeaderBudgetPacer,
  nextMidnight,
  nextResetCandidate,
  type RunInfo,
  type SourceAdapter,
  SourceClient,
} from "@drover/provider-sdk";
import { runSettings } from "./config.js";
import { DEFAULT_DAILY_RESET } from "./daily-reset.js";
import { tokenCost } from "./token-costs.js";

/** Pipedrive counts its burst limit over a rolling 2 s window, on every plan. */
const BURST_WINDOW_MS = 2_000;
/** A 429 without a reset header: at most one burst window. */
const RATE_LIMIT_WAIT_S = BURST_WINDOW_MS / 1000;
/**
 * Cloudflare blocks a client that kept sending after a 429; it lifts after about a minute. Only the
 * fallback: when a 429 already stated the account's wall, the source client parks until that wall.
 */
const EDGE_BLOCK_MS = 60_000;

/**
 * Pipedrive's API as the source client and the budget pacers need it: the token in `x-api-token`,
 * token cost of each endpoint (token-costs.ts), the burst window in `x-ratelimit-*` and the daily allowance in
 * `x-daily-ratelimit-token-*`, and Cloudflare's 403 block page, which means "too many requests" and
 * not "forbidden".
 *
 * A 429 for a spent day looks like a burst 429 in its headers (they describe the burst window:
 * `x-ratelimit-remaining` above 0, a reset of a second or two); its body says the day's budget is
 * spent, and so does a daily count below the call's cost. Nothing says when the day returns: the
 * account's rule (`dailyReset`, see DEFAULT_DAILY_RESET) is only a hint, since Pipedrive's midnight is
 * "server time", which "may not be aligned" with the customer's, and the rule is off by an hour on
 * the day a time zone changes its offset. So a refusal walls the account only until the next half
 * hour where a midnight may fall (or its Retry-After, if later), and the budget keeper finds the
 * reset from there by probing.
 */
export function pipedriveAdapter(dailyReset = DEFAULT_DAILY_RESET, daySeconds = 86_400): SourceAdapter {
  const dayMs = daySeconds * 1000;
  const rule = (now: number) =>
    dailyReset === "probe"
      ? undefined
      : daySeconds === 86_400
        ? nextMidnight(now, dailyReset)
        : // A shorter day (a sandbox's) starts at multiples of its length since the epoch.
          Math.floor(now / dayMs) * dayMs + dayMs;
  return {
    authHeaders: (token) => ({ "x-api-token": token }),
    cost: tokenCost,
    readBudget({ status, headers, body }, cost, now) {
      const reading: BudgetReading = {};
      const limit = intHeader(headers, "x-ratelimit-limit");
      const remaining = intHeader(headers, "x-ratelimit-remaining");
      const reset = intHeader(headers, "x-ratelimit-reset");
      const daily = intHeader(headers, "x-daily-ratelimit-token-remaining");
      const dailyLimit = intHeader(headers, "x-daily-ratelimit-token-limit");
      if (limit !== undefined) {
        reading.burstCapacity = limit;
        reading.burstWindowMs = BURST_WINDOW_MS;
      }
      if (remaining !== undefined) reading.burstRemaining = remaining;
      if (dailyLimit !== undefined) reading.dailyLimit = dailyLimit;
      if (reset !== undefined) reading.burstResetAt = now + Math.max(reset, 0) * 1000;
      if (status === 429 && (dailyRefusal(body) || (daily !== undefined && daily < cost))) {
        // The day is spent: nothing goes to the account before the day may be back, whatever the
        // burst headers say; when that is, the keeper learns from the source (the rule is a hint).
        const { resetAt, resetBy } = dailyResetOf({ rule: rule(now) }, now);
        reading.daily = { remaining: 0, resetAt, resetBy, spent: true, periodMs: dayMs };
        // Never before the 429's Retry-After either: asking inside it is what draws Cloudflare's 403.
        const retryAfterS = intHeader(headers, "retry-after") ?? reset ?? RATE_LIMIT_WAIT_S;
        reading.blockedUntil = Math.max(
          nextResetCandidate(now, dayMs),
          now + Math.max(1, retryAfterS) * 1000,
        );
        return reading;
      }
      if (status === 429) reading.blockedUntil = now + Math.max(1, reset ?? RATE_LIMIT_WAIT_S) * 1000;
      // Asked only when the answer counts the day: the rule reads the wall clock of a time zone,
      // which cost ~1 ms of CPU per answer, a sixth of a worker's time per request at latency 0.
      const ruled = daily === undefined ? undefined : rule(now);
      if (daily !== undefined && ruled !== undefined)
        reading.daily = { remaining: daily, resetAt: ruled, resetBy: "rule", periodMs: dayMs };
      return reading;
    },
    throttledUntil: ({ status, body }, now) =>
      status === 403 && /cloudflare/i.test(body) ? now + EDGE_BLOCK_MS : undefined,
  };
}

/**
 * Whether a 429's body says the company's daily budget is spent (Pipedrive's error envelope), not
 * the burst window: it says nothing of when the day returns, and none is read from it.
 */
export function dailyRefusal(body: string | undefined): boolean {
  if (!body) return false;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return false;
  }
  if (typeof parsed !== "object" || parsed === null) return false;
  const { error, error_info: info, code } = parsed as Record<string, unknown>;
  const text = [error, info, code].filter((v) => typeof v === "string").join(" ");
  return /daily/i.test(text) && /budget|limit/i.test(text);
}

/**
 * One pacer per source account and process: every task of this worker that talks to the account
 * reads the same rate-limit headers, so they slow down together instead of each finding the wall.
 */
const pacers = new Map<string, HeaderBudgetPacer>();

/**
 * A client for the run's account. `pacer` is the leased budget the worker hands in; without one
 * (a provider run outside a worker) the account's headers pace it.
 */
export function clientFor(run: RunInfo, baseUrl: string, leased?: BudgetPacer): SourceClient {
  const apiToken = run.secret ?? "";
  const { dailyReset, daySeconds } = runSettings(run).settings;
  const adapter = pipedriveAdapter(dailyReset, daySeconds);
  if (leased) return new SourceClient({ baseUrl, apiToken, adapter, pacer: leased });
  const key = `${run.source}\u0000${run.sourceAccount}`;
  let pacer = pacers.get(key);
  if (!pacer) {
    pacer = new HeaderBudgetPacer();
    pacers.set(key, pacer);
  }
  return new SourceClient({ baseUrl, apiToken, adapter, pacer });
}

function intHeader(headers: Headers, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null) return undefined;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) ? n : undefined;
}
