/** The kinds of call a source's allowance prices differently. */
export type CallType = "list" | "get" | "update" | "search";

/**
 * How a daily reset was learnt, in the order they are believed (see dailyResetOf): a header that
 * states it, the refusal's body, the account's documented rule, else nothing (the reset is a guess
 * that a probe checks, with backoff).
 */
export type DailyResetSource = "header" | "body" | "rule" | "guess";

/** The source's daily allowance as one answer stated it. The reset comes with the count, always. */
export interface DailyReading {
  /** Token units left today. */
  remaining: number;
  /** When the allowance is whole again (epoch ms): see resetBy. */
  resetAt: number;
  /** Where resetAt comes from; absent means the account's rule. */
  resetBy?: DailyResetSource;
  /** The answer refused the call because the day's allowance is spent (not the burst window). */
  spent?: boolean;
  /** The length of the account's day (ms), when the adapter knows it: where a reset may fall is on its half hours. */
  periodMs?: number;
}

/** What one answer of the source said about the account's allowance; a reading it did not state is absent. */
export interface BudgetReading {
  /** Requests the burst window allows. */
  burstCapacity?: number;
  /** The rolling window burstCapacity is counted over (ms). */
  burstWindowMs?: number;
  /** Requests left in the current burst window. */
  burstRemaining?: number;
  /** When the current burst window ends (epoch ms). */
  burstResetAt?: number;
  daily?: DailyReading;
  /** The day's whole allowance in token units, when the answer states it. */
  dailyLimit?: number;
  /**
   * The answer refused the call for the rate: nothing may be sent to the account before this (epoch
   * ms). The source client sets it for every refusal, from the adapter or its own default.
   */
  blockedUntil?: number;
}

/** An answer as the adapter reads it. */
export interface SourceAnswer {
  status: number;
  headers: Headers;
  /** The answer's body, when it could be read (a refusal's body may say what was refused and until when). */
  body?: string;
}

/**
 * What is particular to one source's HTTP API: how a request carries the token, what each call
 * costs against the daily allowance, which answer says what about the allowance, and which refusal
 * other than a 429 means "too many requests". The provider supplies it; the source client, the
 * budget pacers and the worker stay source-neutral.
 */
export interface SourceAdapter {
  /** The request headers that present the token. Never a URL parameter: proxies and logs keep URLs. */
  authHeaders(token: string): Record<string, string>;
  /**
   * Token units a request costs against the daily allowance (0 for a source without one): by the
   * endpoint it asks (`path`, without its query), as the source prices them, else by its type.
   */
  cost(type: CallType, path: string): number;
  /** What the answer says about the allowance. `cost` is what the call that got it costs. */
  readBudget(answer: SourceAnswer, cost: number, now: number): BudgetReading;
  /**
   * For an answer that is not a 429 yet means "too many requests" (an edge's block page, say):
   * the instant before which the account must not be called. Undefined for any other answer.
   */
  throttledUntil?(answer: SourceAnswer & { body: string }, now: number): number | undefined;
}
