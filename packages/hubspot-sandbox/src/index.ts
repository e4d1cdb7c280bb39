import type { AddressInfo } from "node:net";
import type { ObjectType } from "./object-types.js";
import { resolveOptions, type SandboxOptions } from "./options.js";
import { links } from "./schema-api.js";
import { HubSpotApp, type Stats } from "./server.js";
import { idsOf, type Truth, truthOf } from "./truth.js";

export { ENGAGEMENT_TYPES, OBJECT_TYPES, type ObjectType } from "./object-types.js";
export { BATCH_MAX, LIST_MAX, SEARCH_CAP, SEARCH_MAX } from "./objects-api.js";
export { OptionsError, type ResolvedOptions, resolveOptions, type SandboxOptions } from "./options.js";
export type { Policy } from "./rate-limit.js";
export { LINKED_PAIRS } from "./schema-api.js";
export type { Stats } from "./server.js";
export type { Truth } from "./truth.js";

/** What only a program embedding the sandbox can set: nothing of it changes what the API serves. */
export interface SandboxRuntime {
  /** The limiter's clock (ms since the epoch): tests move it instead of sleeping out a window. */
  clock?: () => number;
}

export interface HubSpotSandbox {
  /** Base URL without trailing slash; the API lives under /crm. */
  url: string;
  port: number;
  /** Ids of every record of a type, live and archived apart: what a perfect import finds. */
  ids(type: ObjectType): { live: string[]; archived: string[] };
  /** Every type's ids and every association (also `GET /__sandbox/truth`). */
  truth(): Truth;
  /** Every association of a pair as [child id, parent id] (child type first, as in LINKED_PAIRS). */
  links(child: ObjectType, parent: ObjectType): [string, string][];
  /** Applies a round of changes (edits, additions, archives, restores) stamped now, or at `atMs`. */
  applyChanges(
    atMs?: number,
    round?: { archives?: number; restores?: number },
  ): { round: number; at: string };
  stats(): Stats;
  close(): Promise<void>;
}

/** Starts the sandbox on options.host:options.port (port 0 = any free port). Throws OptionsError. */
export async function startSandbox(
  options: SandboxOptions = {},
  runtime: SandboxRuntime = {},
): Promise<HubSpotSandbox> {
  const opts = resolveOptions(options);
  const app = new HubSpotApp(opts, runtime.clock);
  let url = "";
  const server = app.createServer(() => url);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const dialHost = opts.host === "0.0.0.0" || opts.host === "::" ? "127.0.0.1" : opts.host;
  url = `http://${dialHost.includes(":") ? `[${dialHost}]` : dialHost}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    ids: (type) => idsOf(app.dataset, type),
    truth: () => truthOf(app.dataset),
    links: (child, parent) => links(app.dataset, child, parent),
    applyChanges: (atMs?: number, round?: { archives?: number; restores?: number }) =>
      app.dataset.applyChanges(atMs ?? Date.now(), round),
    stats: () => structuredClone(app.stats),
    close: () => {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
