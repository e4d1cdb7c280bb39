import { PermanentError, type RunInfo } from "@drover/provider-sdk";

/**
 * The hubspot source's settings (a run's `source_config.settings`): what the account's API cannot
 * say of itself. Every key is optional; an unknown one is refused with what to fix, so a typo never
 * silently runs with the default.
 */
export interface HubSpotSettings {
  /**
   * The IANA zone whose midnight the account's daily allowance returns at (HubSpot: the account's
   * time zone, in its settings). Absent: the day's end is probed once the day is spent.
   */
  dailyResetTimeZone: string | undefined;
  /** The length of the account's day in seconds: 86400 for HubSpot; shorter only for a sandbox's day. */
  daySeconds: number;
  /** List pages one task walks before it hands over to a successor task (each page still checkpoints). */
  pagesPerTask: number;
  /** Rows per transaction on the batched write path: one multi-row insert and one ledger claim each. */
  windowSize: number;
}

export const DEFAULT_SETTINGS: HubSpotSettings = {
  dailyResetTimeZone: undefined,
  daySeconds: 86_400,
  pagesPerTask: 10,
  windowSize: 100,
};

type NumericSetting = Exclude<keyof HubSpotSettings, "dailyResetTimeZone">;

const LIMITS: Record<NumericSetting, [number, number]> = {
  daySeconds: [1, 86_400],
  pagesPerTask: [1, 1000],
  windowSize: [1, 1000],
};

/** The setting keys a run may give, for the sentences that refuse one. */
export const SETTING_KEYS: readonly string[] = ["dailyResetTimeZone", ...Object.keys(LIMITS)];

/** What is wrong with a `dailyResetTimeZone` setting, or undefined. */
export function timeZoneProblem(value: string): string | undefined {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: value });
    return undefined;
  } catch {
    return `hubspot setting dailyResetTimeZone must be an IANA time zone (e.g. America/New_York, the account's time zone in HubSpot's settings), got "${value.slice(0, 64)}"`;
  }
}

/** Returns what to fix, or the settings. */
export function parseSettings(raw: Record<string, unknown>): HubSpotSettings | string {
  const out = { ...DEFAULT_SETTINGS };
  for (const [key, value] of Object.entries(raw)) {
    if (key === "dailyResetTimeZone") {
      const problem = timeZoneProblem(String(value));
      if (problem) return problem;
      out.dailyResetTimeZone = String(value);
      continue;
    }
    if (!(key in LIMITS))
      return `unknown hubspot setting "${key.slice(0, 64)}"; known: ${SETTING_KEYS.join(", ")}`;
    const [min, max] = LIMITS[key as NumericSetting];
    const n = typeof value === "number" ? value : Number(value);
    if (!Number.isInteger(n) || n < min || n > max)
      return `hubspot setting ${key} must be an integer from ${min} to ${max}, got "${String(value).slice(0, 64)}"`;
    out[key as NumericSetting] = n;
  }
  return out;
}

export function validateBaseUrl(baseUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    return `base_url "${baseUrl.slice(0, 100)}" is not a URL; give https://api.hubapi.com`;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return `base_url must be http(s), got ${url.protocol.slice(0, 20)}; give https://api.hubapi.com`;
  if (url.username || url.password) return "base_url must not carry credentials; pass api_token instead";
  return undefined;
}

/** What a run was started with, checked again (a stored config is read as untrusted as a new one). */
export function runSettings(run: RunInfo): { baseUrl: string; settings: HubSpotSettings } {
  const baseUrl = String(run.sourceConfig.baseUrl ?? "");
  const settings = parseSettings((run.sourceConfig.settings ?? {}) as Record<string, unknown>);
  if (typeof settings === "string") throw new PermanentError(settings);
  return { baseUrl, settings };
}

/**
 * The zone whose midnight a run's account is believed to reset at (Provider.dailyResetTimeZone):
 * its `dailyResetTimeZone` setting; none when not given (the keeper probes for the day's end).
 */
export function dailyResetTimeZone(run: RunInfo): string | undefined {
  const parsed = parseSettings((run.sourceConfig.settings ?? {}) as Record<string, unknown>);
  return typeof parsed === "string" ? undefined : parsed.dailyResetTimeZone;
}
