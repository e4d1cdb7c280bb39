import {
  type BudgetPacer,
  type BudgetReading,
  type CallType,
  HeaderBudgetPacer,
  type RunInfo,
  type SourceAdapter,
  SourceClient,
} from "@drover/provider-sdk";

/** Pipedrive's token costs per call type, against the daily allowance. */
export const TOKEN_COSTS: Readonly<Record<CallType, number>> = { list: 20, get: 2, update: 10, search: 40 };

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
 * token costs per call type, the burst window in `x-ratelimit-*` and the daily allowance in
 * `x-daily-ratelimit-token-remaining`, and Cloudflare's 403 block page, which means "too many
 * requests" and not "forbidden".
 *
 * The daily allowance comes back at midnight in the company's time zone (`timeZone`; UTC while the
 * company's is not known). When a 429 says the allowance is spent, its reset header says when, and
 * that answer wins over the rule. The rule is off by an hour on the day a time zone changes its offset.
 */
export function pipedriveAdapter(timeZone = "UTC"): SourceAdapter {
  return {
    authHeaders: (token) => ({ "x-api-token": token }),
    cost: (type) => TOKEN_COSTS[type],
    readBudget({ status, headers }, cost, now) {
      const reading: BudgetReading = {};
      const limit = intHeader(headers, "x-ratelimit-limit");
      const remaining = intHeader(headers, "x-ratelimit-remaining");
      const reset = intHeader(headers, "x-ratelimit-reset");
      const daily = intHeader(headers, "x-daily-ratelimit-token-remaining");
      if (limit !== undefined) {
        reading.burstCapacity = limit;
        reading.burstWindowMs = BURST_WINDOW_MS;
      }
      if (remaining !== undefined) reading.burstRemaining = remaining;
      if (reset !== undefined) reading.burstResetAt = now + Math.max(reset, 0) * 1000;
      if (status === 429) reading.blockedUntil = now + Math.max(1, reset ?? RATE_LIMIT_WAIT_S) * 1000;
      if (daily !== undefined) {
        // A 429 for want of daily tokens carries the allowance's own reset.
        const spent = status === 429 && daily < cost && reading.blockedUntil !== undefined;
        reading.daily = {
          remaining: daily,
          resetAt: spent ? reading.blockedUntil! : nextMidnight(now, timeZone),
        };
      }
      return reading;
    },
    throttledUntil: ({ status, body }, now) =>
      status === 403 && /cloudflare/i.test(body) ? now + EDGE_BLOCK_MS : undefined,
  };
}

const pipedrive = pipedriveAdapter();

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
  if (leased) return new SourceClient({ baseUrl, apiToken, adapter: pipedrive, pacer: leased });
  const key = `${run.source}\u0000${run.sourceAccount}`;
  let pacer = pacers.get(key);
  if (!pacer) {
    pacer = new HeaderBudgetPacer();
    pacers.set(key, pacer);
  }
  return new SourceClient({ baseUrl, apiToken, adapter: pipedrive, pacer });
}

/** The first midnight after `now` on the wall clock of `timeZone`. */
export function nextMidnight(now: number, timeZone: string): number {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone,
    hourCycle: "h23",
    hour: "numeric",
    minute: "numeric",
    second: "numeric",
  }).formatToParts(new Date(now));
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const sinceMidnight = ((part("hour") * 60 + part("minute")) * 60 + part("second")) * 1000 + (now % 1000);
  return now - sinceMidnight + 86_400_000;
}

function intHeader(headers: Headers, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null) return undefined;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) ? n : undefined;
}
