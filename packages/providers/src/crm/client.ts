import { HeaderPacer, type Pacer, type RunInfo, SourceClient } from "@drover/provider-sdk";

/**
 * One pacer per source account and process: every task of this worker that talks to the account
 * reads the same rate-limit headers, so they slow down together instead of each finding the wall.
 */
const pacers = new Map<string, HeaderPacer>();

/**
 * A client for the run's account. `pacer` is the leased budget the worker hands in; without one
 * (a provider run outside a worker) the account's headers pace it.
 */
export function clientFor(run: RunInfo, baseUrl: string, leased?: Pacer): SourceClient {
  if (leased) return new SourceClient({ baseUrl, apiToken: run.secret ?? "", pacer: leased });
  const key = `${run.source}\u0000${run.sourceAccount}`;
  let pacer = pacers.get(key);
  if (!pacer) {
    pacer = new HeaderPacer();
    pacers.set(key, pacer);
  }
  return new SourceClient({ baseUrl, apiToken: run.secret ?? "", pacer });
}
