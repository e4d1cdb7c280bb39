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
