import type { CallType } from "./options.js";
import type { DayLog } from "./rate-limit.js";

/** Counters over API requests (/v1/...) only: sandbox endpoints would skew benchmarks. */
export interface Stats {
  requests: number;
  byStatus: Record<string, number>;
  byCallType: Record<string, number>;
  /** Requests and the tokens they were charged, by endpoint as ENDPOINT_COSTS names it (`/v1/leads/{id}`). */
  byEndpoint: Record<string, { requests: number; tokens: number }>;
  /** Responses with status 429. */
  rateLimited: number;
  /** Cloudflare-like 403 pages. */
  blocked: number;
  transientErrors: number;
  /** Token units charged against the daily budget (5xx and 429 cost nothing). */
  tokensSpent: number;
  /** Remaining daily budget, null when the budget is unlimited. */
  dailyBudgetRemaining: number | null;
  /**
   * Epoch ms of the first and the last admitted API request since the last reset (every request
   * that passed the rate limiter: not 401, 403 or 429); null before the first one. Taken when the
   * answer is sent, so both include the configured latency: their difference, what benchmarks use
   * to know how long work was queued against the burst window, does not when latency is constant.
   */
  firstRequestAt: number | null;
  lastRequestAt: number | null;
  since: string;
  /** Each day of the daily budget so far, the current one last (one, unending, without a budget). */
  days: DayLog[];
}

/** Statuses of requests the rate limiter never admitted. */
const NOT_ADMITTED = new Set([401, 403, 429]);

export class StatsRecorder {
  private requests = 0;
  private byStatus: Record<string, number> = {};
  private byCallType: Record<string, number> = {};
  private byEndpoint: Record<string, { requests: number; tokens: number }> = {};
  private transientErrors = 0;
  private tokensSpent = 0;
  private firstRequestAt: number | null = null;
  private lastRequestAt: number | null = null;
  private since: string;

  constructor(private readonly now: () => number = Date.now) {
    this.since = new Date(now()).toISOString();
  }

  record(
    status: number,
    callType: CallType | null,
    tokens: number,
    transient: boolean,
    endpoint: string | null = null,
  ): void {
    this.requests++;
    this.byStatus[status] = (this.byStatus[status] ?? 0) + 1;
    if (callType) this.byCallType[callType] = (this.byCallType[callType] ?? 0) + 1;
    if (endpoint) {
      this.byEndpoint[endpoint] ??= { requests: 0, tokens: 0 };
      const seen = this.byEndpoint[endpoint];
      seen.requests++;
      seen.tokens += tokens;
    }
    if (transient) this.transientErrors++;
    this.tokensSpent += tokens;
    if (!NOT_ADMITTED.has(status)) {
      const at = this.now();
      this.firstRequestAt ??= at;
      this.lastRequestAt = Math.max(this.lastRequestAt ?? at, at);
    }
  }

  snapshot(dailyBudgetRemaining: number | null, days: DayLog[] = []): Stats {
    return {
      requests: this.requests,
      byStatus: { ...this.byStatus },
      byCallType: { ...this.byCallType },
      byEndpoint: Object.fromEntries(Object.entries(this.byEndpoint).map(([k, v]) => [k, { ...v }])),
      rateLimited: this.byStatus[429] ?? 0,
      blocked: this.byStatus[403] ?? 0,
      transientErrors: this.transientErrors,
      tokensSpent: this.tokensSpent,
      dailyBudgetRemaining,
      firstRequestAt: this.firstRequestAt,
      lastRequestAt: this.lastRequestAt,
      since: this.since,
      days,
    };
  }

  reset(): void {
    this.requests = 0;
    this.byStatus = {};
    this.byCallType = {};
    this.byEndpoint = {};
    this.transientErrors = 0;
    this.tokensSpent = 0;
    this.firstRequestAt = null;
    this.lastRequestAt = null;
    this.since = new Date(this.now()).toISOString();
  }
}
