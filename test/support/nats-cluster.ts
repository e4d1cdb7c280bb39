import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { freePort } from "./free-port.js";

/**
 * A three-node NATS cluster of the test's own on loopback, as production runs it (docs/operating.md, "Running
 * in production"): each node with its own client, route and monitoring ports and its own store
 * folder, JetStream on every node, and `sync_interval: always` (each write is fsynced before it is
 * acknowledged: Jepsen's 2025 analysis of NATS 2.12.1 lost acknowledged messages under the default
 * two-minute fsync when nodes crashed together).
 *
 * `sync_interval` exists from nats-server 2.10 on (Debian bookworm ships 2.9.10, which refuses the
 * field): the binary is NATS_SERVER_BIN when set, else what infra/scripts/ensure-nats-server.sh
 * gives (a nats-server >= 2.10 on PATH, or Debian trixie's 2.10 extracted into .artifacts/). Each
 * node's /varz must report `sync_always` once it is up, or the cluster does not start.
 */
export interface NatsNode {
  name: string;
  /** host:port for clients. */
  url: string;
  storeDir: string;
  readonly pid: number | undefined;
  readonly running: boolean;
}

export interface NatsCluster {
  nodes: readonly NatsNode[];
  /** Every node's client address, comma-separated: the NATS_URL services are given. */
  url: string;
  /** SIGKILLs node `index` (no shutdown, no flush) and resolves once it has exited. */
  kill(index: number): Promise<void>;
  /** Starts node `index` again on its ports and store; resolves once it is current with the cluster. */
  start(index: number): Promise<void>;
  /** The index of the node leading the stream's group (its writes go there), if one leads. */
  streamLeader(stream: string): Promise<number | undefined>;
  /** Resolves once every running node reports itself current (healthz: meta, streams, consumers). */
  untilHealthy(timeoutMs?: number): Promise<void>;
  /** Starts every node that is down. */
  ensureRunning(): Promise<void>;
  stop(): Promise<void>;
}

const CLUSTER_NAME = "drover-test";

interface NodeSpec {
  name: string;
  client: number;
  route: number;
  monitor: number;
  storeDir: string;
  config: string;
}

function nodeConfig(node: NodeSpec, routes: number[]): string {
  return [
    `server_name: "${node.name}"`,
    `listen: "127.0.0.1:${node.client}"`,
    `http: "127.0.0.1:${node.monitor}"`,
    "jetstream {",
    `  store_dir: "${node.storeDir}"`,
    "  sync_interval: always",
    "}",
    "cluster {",
    `  name: "${CLUSTER_NAME}"`,
    `  listen: "127.0.0.1:${node.route}"`,
    `  routes: [${routes.map((p) => `"nats-route://127.0.0.1:${p}"`).join(", ")}]`,
    "}",
    "",
  ].join("\n");
}

const ENSURE_SCRIPT = fileURLToPath(new URL("../../infra/scripts/ensure-nats-server.sh", import.meta.url));

/** A nats-server >= 2.10: the path infra/scripts/ensure-nats-server.sh prints last (it may download). */
function ensureNatsServer(): string {
  const res = spawnSync("bash", [ENSURE_SCRIPT], { encoding: "utf8", timeout: 300_000 });
  const path = res.stdout.trim().split("\n").at(-1);
  if (res.status !== 0 || !path)
    throw new Error(
      `no nats-server >= 2.10 for the cluster (bash ${ENSURE_SCRIPT}): ${res.stderr || res.stdout}`,
    );
  return path;
}

/**
 * The node's own account of its JetStream settings: a configuration that parsed but is not in force
 * (a field ignored, a default changed) would otherwise pass unseen.
 */
async function expectSyncAlways(node: NodeSpec): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${node.monitor}/varz`, {
    signal: AbortSignal.timeout(5_000),
  });
  const varz = (await res.json()) as { jetstream?: { config?: { sync_always?: boolean } } };
  if (varz.jetstream?.config?.sync_always !== true)
    throw new Error(
      `nats ${node.name}: /varz does not report sync_always (jetstream.config: ${JSON.stringify(varz.jetstream?.config)})`,
    );
}

/** Nodes that did not become healthy, or do not follow the cluster's meta leader, in time. */
class NotCurrentError extends Error {
  constructor(
    readonly nodes: number[],
    message: string,
  ) {
    super(message);
  }
}

export async function startNatsCluster(options: {
  logDir: string;
  size?: number;
  binary?: string;
  log?: (line: string) => void;
}): Promise<NatsCluster> {
  const binary = options.binary ?? process.env.NATS_SERVER_BIN ?? ensureNatsServer();
  const size = options.size ?? 3;
  mkdirSync(options.logDir, { recursive: true });
  const root = mkdtempSync(join(tmpdir(), "drover-nats-cluster-"));
  const specs: NodeSpec[] = [];
  for (let i = 1; i <= size; i++) {
    const storeDir = join(root, `n${i}`);
    mkdirSync(storeDir);
    specs.push({
      name: `n${i}`,
      client: await freePort(),
      route: await freePort(),
      monitor: await freePort(),
      storeDir,
      config: join(root, `n${i}.conf`),
    });
  }
  const routes = specs.map((s) => s.route);
  for (const s of specs) writeFileSync(s.config, nodeConfig(s, routes));
  // `-t` checks a configuration without starting: an older server names the field it does not know.
  const check = spawnSync(binary, ["-t", "-c", specs[0]!.config], { encoding: "utf8" });
  if (check.status !== 0)
    throw new Error(
      `${binary} refused the cluster configuration (sync_interval needs nats-server 2.10 or later; bash infra/scripts/ensure-nats-server.sh fetches one): ${check.stderr || check.stdout}`,
    );

  const children: (ChildProcess | undefined)[] = specs.map(() => undefined);
  const exits: Promise<void>[] = specs.map(() => Promise.resolve());
  const logs = specs.map((s) =>
    createWriteStream(join(options.logDir, `nats-${s.name}.log`), { flags: "a" }),
  );
  const alive = (i: number) => {
    const c = children[i];
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  };
  const healthy = async (i: number): Promise<boolean> => {
    try {
      const res = await fetch(`http://127.0.0.1:${specs[i]!.monitor}/healthz`, {
        signal: AbortSignal.timeout(1_000),
      });
      return res.ok;
    } catch {
      return false;
    }
  };
  // Healthy nodes are not yet a JetStream cluster: a stream asking for 3 replicas is refused ("no
  // suitable peers") until the meta leader counts the others as current peers.
  const metaFormed = async (): Promise<boolean> => {
    // Every running node, whichever were just (re)started: the leader may be any of them.
    const indexes = specs.map((_, i) => i).filter(alive);
    try {
      const views = await Promise.all(
        indexes.map(async (i) => {
          const res = await fetch(`http://127.0.0.1:${specs[i]!.monitor}/jsz`, {
            signal: AbortSignal.timeout(1_000),
          });
          return (await res.json()) as {
            meta_cluster?: { leader?: string; replicas?: { name: string; current?: boolean }[] };
          };
        }),
      );
      // Only the meta leader lists the replicas it follows; every node must name the same leader.
      const leader = views.find((v) => v.meta_cluster?.leader && v.meta_cluster.replicas !== undefined);
      const name = leader?.meta_cluster?.leader;
      if (!name || !views.every((v) => v.meta_cluster?.leader === name)) return false;
      const current = (leader.meta_cluster?.replicas ?? []).filter((r) => r.current).length;
      return current >= indexes.length - 1;
    } catch {
      return false;
    }
  };
  // The running nodes that do not follow the meta leader the others agree on: they name another
  // or none, the leader lists them as not current, or the leader does not list them at all (none
  // agreed: all of them). The last is nats-server 2.10's cold-start race: two nodes elect a meta
  // leader while the third's routes are still forming, the group's size drops to the two, and the
  // third names the leader, answers /healthz, and is never added as a peer (1 cold start in 8 to
  // 40 on this machine; a restart of that node joins it within a second, as it does a late node).
  const leaderless = async (): Promise<number[]> => {
    const indexes = specs.map((_, i) => i).filter(alive);
    type Jsz = { meta_cluster?: { leader?: string; replicas?: { name: string; current?: boolean }[] } };
    const views = await Promise.all(
      indexes.map(async (i): Promise<Jsz> => {
        try {
          const res = await fetch(`http://127.0.0.1:${specs[i]!.monitor}/jsz`, {
            signal: AbortSignal.timeout(1_000),
          });
          return (await res.json()) as Jsz;
        } catch {
          return {};
        }
      }),
    );
    const named = views.map((v) => v.meta_cluster?.leader ?? "");
    const votes = new Map<string, number>();
    for (const n of named) if (n) votes.set(n, (votes.get(n) ?? 0) + 1);
    const [agreed] = [...votes.entries()].sort((a, b) => b[1] - a[1])[0] ?? [""];
    const leaderView = views.find((v) => v.meta_cluster?.leader === agreed && v.meta_cluster.replicas);
    const members = leaderView
      ? new Set([agreed, ...(leaderView.meta_cluster?.replicas ?? []).map((r) => r.name)])
      : undefined;
    const behind = new Set(
      views
        .flatMap((v) => v.meta_cluster?.replicas ?? [])
        .filter((r) => r.current === false)
        .map((r) => r.name),
    );
    return indexes.filter(
      (i, k) =>
        !agreed ||
        named[k] !== agreed ||
        behind.has(specs[i]!.name) ||
        (members !== undefined && !members.has(specs[i]!.name)),
    );
  };
  const untilHealthy = async (indexes: number[], timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const down = indexes.filter((i) => !alive(i));
      if (down.length > 0) throw new Error(`nats ${down.map((i) => specs[i]!.name).join(", ")} exited`);
      const states = await Promise.all(indexes.map(healthy));
      if (states.every(Boolean) && (await metaFormed())) return;
      if (Date.now() > deadline) {
        const unhealthy = indexes.filter((_, k) => !states[k]);
        const lost = unhealthy.length > 0 ? unhealthy : await leaderless();
        throw new NotCurrentError(
          lost,
          `nats ${lost.map((i) => specs[i]!.name).join(", ") || "cluster"} not current after ${timeoutMs} ms`,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  const launch = (i: number) => {
    const proc = spawn(binary, ["-c", specs[i]!.config], { stdio: ["ignore", "pipe", "pipe"] });
    proc.stdout?.pipe(logs[i]!, { end: false });
    proc.stderr?.pipe(logs[i]!, { end: false });
    children[i] = proc;
    exits[i] = new Promise((resolve) => proc.once("exit", () => resolve()));
  };
  const kill = async (i: number) => {
    const proc = children[i];
    if (!proc || !alive(i)) return;
    proc.kill("SIGKILL");
    await exits[i];
  };
  // Whatever happens to the test process, the servers go with it.
  const onExit = () => {
    for (const c of children) c?.kill("SIGKILL");
  };
  process.once("exit", onExit);

  const all = specs.map((_, i) => i);
  try {
    for (const i of all) launch(i);
    // The first meta leader election waits for the routes: a fresh cluster is current within a
    // second. A node that routed to the others but never joined the meta group they formed stays
    // so (seen in CI with nats-server 2.10, and reproduced here: see leaderless): such a node is
    // restarted, as an operator would, up to three times.
    for (let round = 1; ; round++) {
      try {
        await untilHealthy(all, 10_000);
        break;
      } catch (err) {
        if (!(err instanceof NotCurrentError) || round === 3) throw err;
        options.log?.(`${err.message}: restarting ${err.nodes.map((i) => specs[i]!.name).join(", ")}`);
        for (const i of err.nodes) {
          await kill(i);
          launch(i);
        }
      }
    }
    for (const i of all) await expectSyncAlways(specs[i]!);
    options.log?.(`nats cluster: ${specs.length} nodes of ${binary}, each reporting sync_always in /varz`);
  } catch (err) {
    await Promise.all(all.map(kill));
    rmSync(root, { recursive: true, force: true });
    throw err;
  }

  const servers = specs.map((s) => `127.0.0.1:${s.client}`);
  return {
    nodes: specs.map((s, i) => ({
      name: s.name,
      url: servers[i]!,
      storeDir: s.storeDir,
      get pid() {
        return children[i]?.pid;
      },
      get running() {
        return alive(i);
      },
    })),
    url: servers.join(","),
    kill,
    async start(i) {
      if (!alive(i)) launch(i);
      await untilHealthy([i], 60_000);
      await expectSyncAlways(specs[i]!);
    },
    async streamLeader(stream) {
      const nc = await connect({ servers: servers.filter((_, i) => alive(i)), timeout: 3_000 });
      try {
        const info = await (await jetstreamManager(nc, { timeout: 5_000 })).streams.info(stream);
        const leader = info.cluster?.leader;
        const index = specs.findIndex((s) => s.name === leader);
        return index < 0 ? undefined : index;
      } catch {
        return undefined;
      } finally {
        await nc.close();
      }
    },
    untilHealthy: (timeoutMs = 60_000) =>
      untilHealthy(
        all.filter((i) => alive(i)),
        timeoutMs,
      ),
    async ensureRunning() {
      const down = all.filter((i) => !alive(i));
      for (const i of down) launch(i);
      await untilHealthy(down, 60_000);
    },
    async stop() {
      await Promise.all(all.map(kill));
      process.removeListener("exit", onExit);
      for (const log of logs) log.end();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** A client list for a NATS_URL that may name several servers. */
export function natsServerList(url: string): string[] {
  return url.split(",").map((s) => s.trim());
}
