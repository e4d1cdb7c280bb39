import type { RunInfo } from "@drover/provider-sdk";

/**
 * Where a Pipedrive company's daily allowance is believed to return until the source shows it: its
 * "midnight at server's timezone", which Pipedrive does not publish per company and no answer
 * states. The crm setting `dailyReset` names that time zone (an IANA name such as Europe/Berlin), or
 * `probe` where it is not known. Either way a hint: the budget keeper probes for the real reset once
 * the day is spent and remembers it (coordinator `daily-reset-search.ts`). UTC by default, the one
 * zone Pipedrive documents for a daily reset (its POST/PUT limit, "reset at midnight in UTC").
 */
export const DEFAULT_DAILY_RESET = "UTC";

/** What is wrong with a `dailyReset` setting, or undefined. */
export function dailyResetProblem(value: string): string | undefined {
  if (value === "probe") return undefined;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: value });
    return undefined;
  } catch {
    return `crm setting dailyReset must be an IANA time zone (e.g. Europe/Berlin) or "probe", got "${value.slice(0, 64)}"`;
  }
}

/**
 * The zone whose midnight a run's account is believed to reset at (Provider.dailyResetTimeZone):
 * its `dailyReset` setting, else the default; none while the account is probed.
 */
export function dailyResetTimeZone(run: RunInfo): string | undefined {
  const setting = (run.sourceConfig.settings as Record<string, unknown> | undefined)?.dailyReset;
  if (setting === "probe") return undefined;
  return typeof setting === "string" && setting !== "" ? setting : DEFAULT_DAILY_RESET;
}
