import { PermanentError, type RunInfo } from "@drover/provider-sdk";
import { DEFAULT_DAILY_RESET, dailyResetProblem } from "./daily-reset.js";

export interface CrmSettings {
  /**
   * Page-walking tasks a v1 list (leads, notes) widens to once two of its pages came back full
   * (stripe i walks pages i, i+N, ...); at most 2 (MAX_V1_STRIPES): each further stripe would read
   * one more empty page, 20 tokens, past the list's end.
   */
  stripes: number;
  /**
   * Chains per normal v2 list, each walking one update_time range side by side (v2 cursors cannot be
   * striped). 1 walks the list as one chain.
   */
  partitions: number;
  /** Rows per list call; Pipedrive's maximum is 500, and a list costs the same tokens at any size. */
  pageSize: number;
  /**
   * Pages one list task walks before it hands over to a successor task. Each page still commits
   * with the task's cursor moved past it, so a retry resumes at the page it was on; more pages per
   * task spare the claim, dispatch and queue round trip a task costs, fewer let other runs' tasks
   * take the lane sooner.
   */
  pagesPerTask: number;
  /**
   * Deals per mail task (a deal's mail list is one request and most deals have little mail: many
   * deals per task keep the per-task overhead — claim, dispatch, finish, barrier — off the mail
   * phase; the task still lists and writes them about 200 messages at a time, checkpointing each
   * window). 50 rather than 10: on the demo's account (3,000 deals, ~7,000 messages) the engine's
   * CPU per row fell by a fifth and its statements per row by half (test/bench/crm-profile.ts).
   */
  dealsPerMailTask: number;
  /** Body fetches in flight per task. */
  bodyConcurrency: number;
  /**
   * Rows per transaction on the batched write path: one multi-row insert and one ledger claim each.
   * Smaller windows bound what a killed worker redoes; larger ones commit less often.
   */
  windowSize: number;
  /**
   * The account's daily token allowance (Pipedrive: 30,000 × the plan's multiplier × seats), for the
   * run's ETA only; 0 when not given (the ETA then counts only what the source reports left today).
   */
  dailyTokens: number;
  /**
   * Where the company's daily token budget returns when no answer says it: an IANA time zone whose
   * midnight it is (Pipedrive: "midnight at server's timezone"), or "probe" (see DEFAULT_DAILY_RESET).
   */
  dailyReset: string;
  /**
   * The length of the source's day in seconds: 86400 for Pipedrive; shorter only for a sandbox
   * whose day is (its days then start at multiples of this since the epoch).
   */
  daySeconds: number;
}

export const DEFAULT_SETTINGS: CrmSettings = {
  stripes: 2,
  partitions: 1,
  pageSize: 500,
  pagesPerTask: 20,
  dealsPerMailTask: 50,
  bodyConcurrency: 4,
  windowSize: 250,
  dailyTokens: 0,
  dailyReset: DEFAULT_DAILY_RESET,
  daySeconds: 86_400,
};

type NumericSetting = Exclude<keyof CrmSettings, "dailyReset">;

const LIMITS: Record<NumericSetting, [number, number]> = {
  stripes: [1, 64],
  partitions: [1, 64],
  pageSize: [1, 500],
  pagesPerTask: [1, 1000],
  dealsPerMailTask: [1, 100],
  bodyConcurrency: [1, 16],
  windowSize: [1, 1000],
  dailyTokens: [0, 1_000_000_000],
  daySeconds: [1, 86_400],
};

/** Returns what to fix, or the settings. */
export function parseSettings(raw: Record<string, string | number | undefined>): CrmSettings | string {
  const out = { ...DEFAULT_SETTINGS };
  for (const [key, value] of Object.entries(raw)) {
    if (key === "dailyReset") {
      const problem = dailyResetProblem(String(value));
      if (problem) return problem;
      out.dailyReset = String(value);
      continue;
    }
    if (!(key in LIMITS))
      return `unknown crm setting "${key}"; known: ${[...Object.keys(LIMITS), "dailyReset"].join(", ")}`;
    const [min, max] = LIMITS[key as NumericSetting];
    const n = typeof value === "number" ? value : Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      return `crm setting ${key} must be an integer from ${min} to ${max}, got "${value}"`;
    out[key as NumericSetting] = n;
  }
  return out;
}

export function validateBaseUrl(baseUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return `base_url "${baseUrl.slice(0, 100)}" is not a URL; give e.g. https://yourcompany.pipedrive.com`;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "base_url must be http(s)";
  if (url.username || url.password) return "base_url must not carry credentials; pass api_token instead";
  return undefined;
}

export function runSettings(run: RunInfo): { baseUrl: string; settings: CrmSettings } {
  const baseUrl = String(run.sourceConfig.baseUrl ?? "");
  const settings = parseSettings((run.sourceConfig.settings ?? {}) as Record<string, string>);
  if (typeof settings === "string") throw new PermanentError(settings);
  return { baseUrl, settings };
}
