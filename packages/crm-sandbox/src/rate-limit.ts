export interface RateLimitSettings {
  burstLimit: number;
  burstWindowMs: number;
  dailyBudget: number;
  dailyResetSeconds: number;
  abuseThreshold: number;
}

export type Admission =
  | { outcome: "ok"; headers: Record<string, string> }
  | { outcome: "burst"; headers: Record<string, string> }
  /** The day's budget is spent until `resetAt` (epoch ms), which no header states. */
  | { outcome: "daily"; headers: Record<string, string>; resetAt: number }
  /** Cloudflare has stepped in: the client ignored a 429. */
  | { outcome: "blocked" };

interface TokenState {
  /** Admission times inside the burst window, oldest first. */
  times: number[];
  /** End of the reset period announced by the last 429. */
  penaltyUntil: number;
  /** Requests received inside that period. */
  strikes: number;
}

/**
 * Pipedrive's two limits: a rolling burst window per token, counted in requests, and a daily budget
 * of token units per company, shared by all of its tokens. Budget is reserved on admission and
 * refunded when the request ends in 5xx, so failed calls cost nothing and concurrent callers cannot
 * overspend between admission and response.
 */
export class RateLimiter {
  private readonly tokens = new Map<string, TokenState>();
  private spent = 0;
  private dailyResetAt: number;

  constructor(
    private readonly settings: RateLimitSettings,
    private readonly now: () => number = Date.now,
  ) {
    this.dailyResetAt = now() + settings.dailyResetSeconds * 1000;
  }

  get budgetRemaining(): number | null {
    this.rollDay(this.now());
    return this.settings.dailyBudget > 0 ? Math.max(0, this.settings.dailyBudget - this.spent) : null;
  }

  admit(token: string, cost: number): Admission {
    const s = this.settings;
    const now = this.now();
    this.rollDay(now);
    const state = this.state(token);
    if (now >= state.penaltyUntil) {
      state.strikes = 0;
    } else if (s.abuseThreshold > 0 && ++state.strikes > s.abuseThreshold) {
      return { outcome: "blocked" };
    }
    while (state.times.length > 0 && (state.times[0] as number) <= now - s.burstWindowMs) state.times.shift();

    if (s.burstLimit > 0 && state.times.length >= s.burstLimit) {
      const leavesAt = (state.times[0] as number) + s.burstWindowMs;
      state.penaltyUntil = Math.max(state.penaltyUntil, leavesAt);
      return { outcome: "burst", headers: this.refusal(state, now, leavesAt) };
    }
    if (s.dailyBudget > 0 && this.spent + cost > s.dailyBudget) {
      state.penaltyUntil = Math.max(state.penaltyUntil, this.dailyResetAt);
      // Pipedrive's headers describe the burst window only: x-ratelimit-remaining stays above 0 and
      // x-ratelimit-reset / Retry-After say "a second or two", not the day's reset.
      const oldest = state.times[0];
      const windowEnds = oldest === undefined ? now + s.burstWindowMs : oldest + s.burstWindowMs;
      return {
        outcome: "daily",
        headers: this.refusal(state, now, s.burstLimit > 0 ? windowEnds : now + 1000, false),
        resetAt: this.dailyResetAt,
      };
    }
    if (s.burstLimit > 0) state.times.push(now);
    this.spent += cost;
    return { outcome: "ok", headers: this.headers(state, now) };
  }

  /** Gives back a reservation whose request failed server-side. */
  refund(cost: number): void {
    this.spent = Math.max(0, this.spent - cost);
  }

  /** Current limit headers for a token, e.g. for a response whose budget was just refunded. */
  headersFor(token: string): Record<string, string> {
    const now = this.now();
    this.rollDay(now);
    return this.headers(this.state(token), now);
  }

  private state(token: string): TokenState {
    let state = this.tokens.get(token);
    if (!state) {
      state = { times: [], penaltyUntil: 0, strikes: 0 };
      this.tokens.set(token, state);
    }
    return state;
  }

  private rollDay(now: number): void {
    if (now < this.dailyResetAt) return;
    const periodMs = this.settings.dailyResetSeconds * 1000;
    this.dailyResetAt += Math.ceil((now - this.dailyResetAt + 1) / periodMs) * periodMs;
    this.spent = 0;
  }

  /** A 429's headers: the usual ones, and Retry-After (seconds), which Pipedrive documents on a 429. */
  private refusal(state: TokenState, now: number, resetAt: number, full = true): Record<string, string> {
    return {
      ...this.headers(state, now, full ? resetAt : undefined),
      "retry-after": String(Math.max(1, Math.ceil((resetAt - now) / 1000))),
    };
  }

  private headers(state: TokenState, now: number, resetAt?: number): Record<string, string> {
    const s = this.settings;
    const headers: Record<string, string> = {};
    if (s.burstLimit > 0) {
      const oldest = state.times[0];
      const leavesAt = resetAt ?? (oldest === undefined ? now + s.burstWindowMs : oldest + s.burstWindowMs);
      const remaining = Math.max(0, s.burstLimit - state.times.length);
      const seconds = Math.ceil((leavesAt - now) / 1000);
      headers["x-ratelimit-limit"] = String(s.burstLimit);
      headers["x-ratelimit-remaining"] = String(remaining);
      headers["x-ratelimit-reset"] = String(
        remaining === 0 || resetAt !== undefined ? Math.max(1, seconds) : seconds,
      );
    } else if (resetAt !== undefined) {
      headers["x-ratelimit-reset"] = String(Math.max(1, Math.ceil((resetAt - now) / 1000)));
    }
    if (s.dailyBudget > 0) {
      headers["x-daily-ratelimit-token-limit"] = String(s.dailyBudget);
      headers["x-daily-ratelimit-token-remaining"] = String(Math.max(0, s.dailyBudget - this.spent));
    }
    return headers;
  }
}
