import type { BudgetPacer, RunInfo } from "@drover/provider-sdk";
import { HubSpotClient } from "./client.js";
import { runSettings } from "./config.js";

/**
 * The client for a run's account. `pacer` is the leased budget the worker hands in (ctx.pacer);
 * without one (a provider run outside a worker) the account's own headers pace this process.
 */
export function clientFor(run: RunInfo, pacer?: BudgetPacer): HubSpotClient {
  const { baseUrl, settings } = runSettings(run);
  return new HubSpotClient({
    baseUrl,
    token: run.secret ?? "",
    account: `${run.source}\u0000${run.sourceAccount}`,
    ...(pacer ? { pacer } : {}),
    limits: { dailyResetTimeZone: settings.dailyResetTimeZone, daySeconds: settings.daySeconds },
  });
}
