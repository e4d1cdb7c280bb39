import { intVar, z } from "./env.js";

/**
 * Where a service finds NATS and how many copies the task stream keeps. Coordinators and workers
 * read both from one definition (spread into each service's schema).
 *
 * The production default is a three-node cluster: NATS_URL lists all three servers (the client
 * connects to any and moves to another when its server goes) and DROVER_STREAM_REPLICAS=3 (the
 * stream survives the loss of one node with no acknowledged message lost). The defaults here, one
 * local server and one replica, are the development machine's.
 */

/** One server: `host:port`, or a `nats://` / `tls://` URL with an optional port. */
const SERVER =
  /^(?:(?:nats|tls):\/\/(?:[^\s,/@]+@)?(?:\[[0-9a-fA-F:]+\]|[^\s,/:@[\]]+)(?::\d{1,5})?|(?:\[[0-9a-fA-F:]+\]|[^\s,/:@[\]]+):\d{1,5})$/;

/**
 * NATS_URL: one server or a comma-separated list of a cluster's servers, e.g.
 * `nats-1:4222,nats-2:4222,nats-3:4222`. Parsed into the list the client is given.
 */
export function natsServers(fallback = "127.0.0.1:4222") {
  return z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      const servers = v.split(",").map((s) => s.trim());
      const bad = servers.filter((s) => !SERVER.test(s));
      if (bad.length > 0) {
        ctx.addIssue({
          code: "custom",
          message: `must be host:port or nats://host:port, comma-separated for a cluster (e.g. nats-1:4222,nats-2:4222,nats-3:4222); not a server: ${bad.map((s) => JSON.stringify(s)).join(", ")}`,
        });
        return z.NEVER;
      }
      const twice = servers.filter((s, i) => servers.indexOf(s) !== i);
      if (twice.length > 0) {
        ctx.addIssue({ code: "custom", message: `lists ${twice.join(", ")} more than once` });
        return z.NEVER;
      }
      return servers;
    })
    .meta({ format: "`host:port` or `nats://host:port`, comma-separated for a cluster" });
}

/**
 * DROVER_STREAM_REPLICAS: copies of the task stream JetStream keeps, each on its own server. 3 on a
 * three-node cluster (one node may fail); 1 on a single server, which refuses more. JetStream keeps
 * at most 5.
 */
export function streamReplicas() {
  return intVar(1, 5, 1);
}

/** NATS_URL and DROVER_STREAM_REPLICAS, for a service's schema. */
export const NATS_SETTINGS = {
  NATS_URL: natsServers().describe(
    "The NATS server, or a cluster's servers comma-separated (the client connects to any, and moves on when it goes); JetStream must be enabled.",
  ),
  DROVER_STREAM_REPLICAS: streamReplicas().describe(
    "Copies of the task stream: `3` on a three-node cluster, `1` on a single server (which refuses more). The same on every coordinator and worker; a process whose value differs from the existing stream's refuses to start.",
  ),
};
