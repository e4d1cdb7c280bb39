export interface RateLimitSettings {
  burstLimit: number;
  burstWindowMs: number;
  dailyBudget: number;
  dailyResetSeconds: number;
  /** Where in its length the day begins: seconds past each multiple of it since the epoch. */
  dailyResetOffsetSeconds?: number;
  abuseThreshold: number;
}

export type Admission =
  | { outcome: "ok"; headers: Record<string, string> }
  | { outcome: "burst"; headers: Record<string, string> }
  /** The day's budget is spent; neither a header nor the body says until when. */
  | { outcome: "daily"; headers: Record<string, string> }
  /** Cloudflare has stepped in: the client ignored a 429. */
  | { outcome: "blocked" };

/** One day of the daily budget as the sandbox saw it: what tests and benchmarks judge a client by. */
export interface DayLog {
  /** When the day began (epoch ms): the previous day's reset. */
  startedAt: number;
  endsAt: number;
  /** The first request admitted in the day; null while none was. */
  firstAdmittedAt: number | null;
  /** The first request admitted in the day per API token: whether every run sharing the day resumed. */
  firstAdmittedByToken: Record<string, number>;
  admitted: number;
  /** Token units charged in the day (5xx refunded). */
  spent: number;
  /** Token units charged per API token: several runs with their own tokens share one company's day. */
  spentByToken: Record<string, number>;
  /** 429s for a spent day, 429s for a full burst window, and 403 block pages. */
  dailyRefusals: number;
  burstRefusals: number;
  blocked: number;
}

interface TokenState {
  /** Admission times inside the burst window, oldest first. */
  times: number[];
  /** End of the reset period announced by the last 429. */
  penaltyUntil: number;
  /** Requests received inside that period. */
  strikes: number;
}

/**
 * What the sandbox advertises for a token when its burst limit is off: Pipedrive describes a burst
 * window on every answer, so an "unlimited" sandbox still sends one, too wide to ever be reached.
 */
export const UNMETERED_BURST_LIMIT = 10_000;

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
  private readonly days: DayLog[] = [];

  constructor(
    private readonly settings: RateLimitSettings,
    private readonly now: () => number = Date.now,
  ) {
    // Days start at an offset past multiples of their length since the epoch, as Pipedrive's start
    // at midnight "server time", which may not be the customer's (DOC-RL): with no offset a day of
    // 86,400 s resets at midnight UTC, offset by 3,600 s at 01:00 UTC, and a client's rule may be wrong.
    const periodMs = settings.dailyResetSeconds * 1000;
    const offsetMs = ((settings.dailyResetOffsetSeconds ?? 0) * 1000) % periodMs;
    this.dailyResetAt = Math.floor((now() - offsetMs) / periodMs) * periodMs + offsetMs + periodMs;
    this.days.push(this.newDay());
  }

  /** Every day so far, the current one last. */
  dayLog(): DayLog[] {
    this.rollDay(this.now());
    return this.days.map((d) => ({ ...d, spentByToken: { ...d.spentByToken } }));
  }

  private newDay(): DayLog {
    return {
      startedAt: this.dailyResetAt - this.settings.dailyResetSeconds * 1000,
      endsAt: this.dailyResetAt,
      firstAdmittedAt: null,
      firstAdmittedByToken: {},
      admitted: 0,
      spent: 0,
      spentByToken: {},
      dailyRefusals: 0,
      burstRefusals: 0,
      blocked: 0,
    };
  }

  private get today(): DayLog {
    return this.days[this.days.length - 1]!;
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
      this.today.blocked++;
      return { outcome: "blocked" };
    }
    while (state.times.length > 0 && (state.times[0] as number) <= now - s.burstWindowMs) state.times.shift();

    if (s.burstLimit > 0 && state.times.length >= s.burstLimit) {
      const leavesAt = (state.times[0] as number) + s.burstWindowMs;
      state.penaltyUntil = Math.max(state.penaltyUntil, leavesAt);
      this.today.burstRefusals++;
      return { outcome: "burst", headers: this.refusal(state, now, leavesAt) };
    }
    if (s.dailyBudget > 0 && this.spent + cost > s.dailyBudget) {
      this.today.dailyRefusals++;
      // Pipedrive's headers describe the burst window only: x-ratelimit-remaining stays above 0 and
      // x-ratelimit-reset / Retry-After say "a second or two", not the day's reset.
      const oldest = state.times[0];
      const windowEnds = oldest === undefined ? now + s.burstWindowMs : oldest + s.burstWindowMs;
      const retryAt = s.burstLimit > 0 ? windowEnds : now + 1000;
      // Cloudflare blocks traffic kept up despite the 429, i.e. sent before its Retry-After: a client
      // that asks once per Retry-After or slower (a probe of the day's reset) is not hammering.
      state.penaltyUntil = Math.max(
        state.penaltyUntil,
        now + Math.max(1, Math.ceil((retryAt - now) / 1000)) * 1000,
      );
      return { outcome: "daily", headers: this.refusal(state, now, retryAt, false) };
    }
    state.times.push(now);
    this.spent += cost;
    const day = this.today;
    day.firstAdmittedAt ??= now;
    day.firstAdmittedByToken[token] ??= now;
    day.admitted++;
    day.spent += cost;
    day.spentByToken[token] = (day.spentByToken[token] ?? 0) + cost;
    return { outcome: "ok", headers: this.headers(state, now) };
  }

  /** Gives back a reservation whose request failed server-side. */
  refund(cost: number, token?: string): void {
    this.spent = Math.max(0, this.spent - cost);
    const day = this.today;
    day.spent = Math.max(0, day.spent - cost);
    if (token !== undefined && day.spentByToken[token] !== undefined)
      day.spentByToken[token] = Math.max(0, day.spentByToken[token] - cost);
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
    this.days.push(this.newDay());
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
    const limit = s.burstLimit > 0 ? s.burstLimit : UNMETERED_BURST_LIMIT;
    const oldest = state.times[0];
    const leavesAt = resetAt ?? (oldest === undefined ? now + s.burstWindowMs : oldest + s.burstWindowMs);
    const remaining = Math.max(0, limit - state.times.length);
    const seconds = Math.ceil((leavesAt - now) / 1000);
    headers["x-ratelimit-limit"] = String(limit);
    headers["x-ratelimit-remaining"] = String(remaining);
    headers["x-ratelimit-reset"] = String(
      remaining === 0 || resetAt !== undefined ? Math.max(1, seconds) : seconds,
    );
    if (s.dailyBudget > 0) {
      headers["x-daily-ratelimit-token-limit"] = String(s.dailyBudget);
      headers["x-daily-ratelimit-token-remaining"] = String(Math.max(0, s.dailyBudget - this.spent));
    }
    return headers;
  }
}
