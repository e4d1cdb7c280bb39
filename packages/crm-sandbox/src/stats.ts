import type { CallType } from "./options.js";

/** Counters over API requests (/v1/...) only: sandbox endpoints would skew benchmarks. */
export interface Stats {
  requests: number;
  byStatus: Record<string, number>;
  byCallType: Record<string, number>;
  /** Responses with status 429. */
  rateLimited: number;
  /** Cloudflare-like 403 pages. */
  blocked: number;
  transientErrors: number;
  /** Token units charged against the daily budget (5xx and 429 cost nothing). */
  tokensSpent: number;
  /** Remaining daily budget, null when the budget is unlimited. */
  dailyBudgetRemaining: number | null;
  since: string;
}

export class StatsRecorder {
  private requests = 0;
  private byStatus: Record<string, number> = {};
  private byCallType: Record<string, number> = {};
  private transientErrors = 0;
  private tokensSpent = 0;
  private since = new Date().toISOString();

  record(status: number, callType: CallType | null, tokens: number, transient: boolean): void {
    this.requests++;
    this.byStatus[status] = (this.byStatus[status] ?? 0) + 1;
    if (callType) this.byCallType[callType] = (this.byCallType[callType] ?? 0) + 1;
    if (transient) this.transientErrors++;
    this.tokensSpent += tokens;
  }

  snapshot(dailyBudgetRemaining: number | null): Stats {
    return {
      requests: this.requests,
      byStatus: { ...this.byStatus },
      byCallType: { ...this.byCallType },
      rateLimited: this.byStatus[429] ?? 0,
      blocked: this.byStatus[403] ?? 0,
      transientErrors: this.transientErrors,
      tokensSpent: this.tokensSpent,
      dailyBudgetRemaining,
      since: this.since,
    };
  }

  reset(): void {
    this.requests = 0;
    this.byStatus = {};
    this.byCallType = {};
    this.transientErrors = 0;
    this.tokensSpent = 0;
    this.since = new Date().toISOString();
  }
}
