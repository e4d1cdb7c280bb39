import { randomUUID } from "node:crypto";

/** Which of HubSpot's limits a refused request hit: the `policyName` of its 429. */
export type Policy = "TEN_SECONDLY_ROLLING" | "DAILY" | "SECONDLY";

export type Admission = { ok: true } | { ok: false; policy: Policy };

export interface LimitSettings {
  tenSecondLimit: number;
  dailyLimit: number;
  dailyResetSeconds: number;
  searchPerSecond: number;
}

const WINDOW_MS = 10_000;

/**
 * HubSpot's limits for one account (developers.hubspot.com/docs/guides/apps/api-usage/usage-details):
 * a rolling 10-second window per app (here: per token), a daily count shared by every app of the
 * account, and the search endpoints' own per-second limit for the account. A refused request is
 * not counted.
 */
export class RateLimiter {
  /** Admission times inside the 10-second window, per token, oldest first. */
  private readonly windows = new Map<string, number[]>();
  private searches: number[] = [];
  private usedToday = 0;
  private dayEndsAt: number;
  refusals: Record<Policy, number> = { TEN_SECONDLY_ROLLING: 0, DAILY: 0, SECONDLY: 0 };

  constructor(
    private readonly s: LimitSettings,
    private readonly now: () => number = Date.now,
  ) {
    const period = s.dailyResetSeconds * 1000;
    this.dayEndsAt = Math.floor(now() / period) * period + period;
  }

  private roll(now: number): void {
    if (now >= this.dayEndsAt) {
      const period = this.s.dailyResetSeconds * 1000;
      this.dayEndsAt = Math.floor(now / period) * period + period;
      this.usedToday = 0;
    }
    while (this.searches.length > 0 && (this.searches[0] as number) <= now - 1000) this.searches.shift();
  }

  private window(token: string, now: number): number[] {
    let times = this.windows.get(token);
    if (!times) {
      times = [];
      this.windows.set(token, times);
    }
    while (times.length > 0 && (times[0] as number) <= now - WINDOW_MS) times.shift();
    return times;
  }

  admit(token: string, search: boolean): Admission {
    const now = this.now();
    this.roll(now);
    const window = this.window(token, now);
    let refused: Policy | null = null;
    if (this.s.dailyLimit > 0 && this.usedToday >= this.s.dailyLimit) refused = "DAILY";
    else if (window.length >= this.s.tenSecondLimit) refused = "TEN_SECONDLY_ROLLING";
    else if (search && this.s.searchPerSecond > 0 && this.searches.length >= this.s.searchPerSecond)
      refused = "SECONDLY";
    if (refused !== null) {
      this.refusals[refused]++;
      return { ok: false, policy: refused };
    }
    window.push(now);
    if (search) this.searches.push(now);
    this.usedToday++;
    return { ok: true };
  }

  /**
   * The `X-HubSpot-RateLimit-*` headers: the 10-second window's size, maximum and what is left, and,
   * for an account with a daily limit (private apps; OAuth calls have none and get no daily headers,
   * developers.hubspot.com/changelog "Rate limit headers will now appear for OAuth authenticated
   * calls"), the day's. `-Secondly` / `-Secondly-Remaining` are still sent, and deprecated.
   */
  headers(token: string): Record<string, string> {
    const now = this.now();
    this.roll(now);
    const window = this.window(token, now);
    const remaining = Math.max(0, this.s.tenSecondLimit - window.length);
    const perSecond = Math.ceil(this.s.tenSecondLimit / 10);
    const lastSecond = window.filter((t) => t > now - 1000).length;
    const out: Record<string, string> = {
      "x-hubspot-ratelimit-interval-milliseconds": String(WINDOW_MS),
      "x-hubspot-ratelimit-max": String(this.s.tenSecondLimit),
      "x-hubspot-ratelimit-remaining": String(remaining),
      "x-hubspot-ratelimit-secondly": String(perSecond),
      "x-hubspot-ratelimit-secondly-remaining": String(Math.max(0, perSecond - lastSecond)),
    };
    if (this.s.dailyLimit > 0) {
      out["x-hubspot-ratelimit-daily"] = String(this.s.dailyLimit);
      out["x-hubspot-ratelimit-daily-remaining"] = String(Math.max(0, this.s.dailyLimit - this.usedToday));
    }
    return out;
  }
}

const MESSAGES: Record<Policy, string> = {
  DAILY: "You have reached your daily limit.",
  TEN_SECONDLY_ROLLING: "You have reached your ten_secondly_rolling limit.",
  SECONDLY: "You have reached your secondly limit.",
};

/**
 * A 429's body as the usage guidelines show it: `status`, `message`, `errorType` RATE_LIMIT,
 * `correlationId`, `policyName` and `requestId`; "the message and policyName will indicate which
 * limit you hit".
 */
export function refusalBody(policy: Policy): Record<string, string> {
  return {
    status: "error",
    message: MESSAGES[policy],
    errorType: "RATE_LIMIT",
    correlationId: randomUUID(),
    policyName: policy,
    requestId: randomUUID(),
  };
}
