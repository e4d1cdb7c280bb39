import type { AddressInfo } from "node:net";
import { Dataset } from "./dataset.js";
import { type TokenMinimum, tokenMinimum } from "./minimum.js";
import { resolveOptions, type SandboxOptions } from "./options.js";
import { SandboxApp } from "./server.js";
import type { Stats } from "./stats.js";
import { type PartialTruth, TRUTH_KINDS, type Truth, type TruthKind } from "./truth.js";
import type { WebhookStats } from "./webhooks.js";

export { ROW_KINDS, type RowKind } from "./dataset.js";
export type { MinimumPart, TokenMinimum } from "./minimum.js";
export {
  type CallType,
  OptionsError,
  type ResolvedOptions,
  resolveOptions,
  type SandboxOptions,
} from "./options.js";
export type { DayLog } from "./rate-limit.js";
export type { Stats } from "./stats.js";
export { ENDPOINT_COSTS, endpointCost } from "./token-costs.js";
export {
  type ActivitiesTruth,
  type AttachedTruth,
  type DealsTruth,
  type KindTruth,
  type LeadsTruth,
  type MailTruth,
  type OrganizationsTruth,
  type PartialTruth,
  type PersonsTruth,
  TRUTH_KINDS,
  type Truth,
  type TruthKind,
  type TruthKinds,
} from "./truth.js";
export { WEBHOOK_OBJECTS, type WebhookRecord, type WebhookStats } from "./webhooks.js";

export interface Sandbox {
  /** Base URL without trailing slash, e.g. http://127.0.0.1:40123; the API lives under /v1. */
  url: string;
  port: number;
  /** Expected outcome of a perfect import; computed per kind on first use and cached (costly when huge). */
  truth(): Truth;
  truth<K extends TruthKind>(kinds: readonly K[]): PartialTruth<K>;
  stats(): Stats;
  /** The fewest tokens the API allows for importing this account and catching up (GET /__sandbox/minimum). */
  minimum(): TokenMinimum;
  resetStats(): void;
  /** What the sandbox's webhooks did: attempts, deliveries, failures, events lost (webhooks.ts). */
  webhookStats(): WebhookStats;
  /**
   * Applies the mid-run change set now (as POST /__sandbox/changes does), or stamped `atMs` when a
   * test needs its rows on an exact instant; false if it already was.
   */
  applyChanges(atMs?: number): boolean;
  /**
   * Applies another round of changes (the first, if none yet): the same rows edited again, rows
   * added and deals deleted of its own, at its own time. False past the last round allowed.
   */
  applyChangesAgain(atMs?: number): boolean;
  close(): Promise<void>;
}

/** Starts the sandbox on options.host:options.port (port 0 = any free port). Throws OptionsError. */
/** What only a program embedding the sandbox can set: nothing of it changes what the API serves. */
export interface SandboxRuntime {
  /**
   * The limiter's clock (burst windows, the daily period), in ms since the epoch. Tests advance it
   * instead of sleeping until a window or a day has passed.
   */
  clock?: () => number;
}

export async function startSandbox(
  options: SandboxOptions = {},
  runtime: SandboxRuntime = {},
): Promise<Sandbox> {
  const opts = resolveOptions(options);
  const app = new SandboxApp(opts, new Dataset(opts), runtime.clock);
  const server = app.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  // A wildcard bind is reachable on loopback; a URL naming the wildcard is not dialable everywhere.
  const dialHost = opts.host === "0.0.0.0" || opts.host === "::" ? "127.0.0.1" : opts.host;
  const host = dialHost.includes(":") ? `[${dialHost}]` : dialHost;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    port,
    truth: ((kinds?: readonly TruthKind[]) => app.truth(kinds ?? TRUTH_KINDS)) as Sandbox["truth"],
    stats: () => app.stats.snapshot(app.limiter.budgetRemaining, app.limiter.dayLog()),
    minimum: () => tokenMinimum(app.dataset),
    resetStats: () => app.stats.reset(),
    webhookStats: () => app.webhooks.snapshot(),
    applyChanges: (atMs?: number) => app.applyChanges(atMs).applied,
    applyChangesAgain: (atMs?: number) => app.applyChanges(atMs, true).applied,
    close: () => {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
