import { join } from "node:path";
import { formatApiKey, issueApiKey } from "@drover/auth";
import { REPO_ROOT, type RunFrom, type ServiceProcess, spawnService } from "./service-process.js";
import { COORDINATOR, DASHBOARD, type ServiceSpec, serviceEnv, WORKER } from "./service-spec.js";

/**
 * Sandbox flags for a cluster whose runs never call the CRM (the pg-table demo, bench and tests):
 * the sandbox starts with every cluster, holding nothing.
 */
export const EMPTY_CRM_SANDBOX: Readonly<Record<string, number>> = {
  organizations: 0,
  persons: 0,
  deals: 0,
  leads: 0,
  activities: 0,
  notes: 0,
  "mail-per-deal-max": 0,
};
export interface ClusterOptions {
  databaseUrl: string;
  natsUrl: string;
  /** Keeps this cluster's JetStream stream apart from others on the same server. */
  queuePrefix: string;
  workers: number;
  laneWidth: number;
  /** crm-sandbox flags, e.g. { persons: 4000, "malformed-rate": 0.01 }. */
  sandbox: Record<string, string | number>;
  coordinators?: number;
  logDir?: string;
  /** Extra environment for coordinators and workers. */
  env?: Record<string, string>;
  /** Also start the run page (services/dashboard), pointed at the first coordinator. */
  dashboard?: boolean;
}

export interface WorkerOverrides {
  env?: Record<string, string>;
  launcher?: string[];
  /** Where this worker starts from, whatever DROVER_CLUSTER_RUN_FROM says (e.g. from source, as the images run it). */
  runFrom?: RunFrom;
}

export interface Cluster {
  sandboxUrl: string;
  coordinatorAddresses: string[];
  /**
   * A bearer token with the `admin` scope, made for this cluster (its hash is in the coordinators'
   * DROVER_API_KEYS; the workers have a worker token of their own). Send it as
   * `authorization: Bearer <token>`, e.g. `createClient(RunService, address, { metadata: () => bearer(adminToken) })`.
   */
  adminToken: string;
  sandbox: ServiceProcess;
  coordinators: ServiceProcess[];
  workers: ServiceProcess[];
  /** The run page, when asked for: open `dashboardUrl` and enter `adminToken` (or a tenant's key). */
  dashboard?: ServiceProcess;
  dashboardUrl?: string;
  logDir: string;
  /**
   * Starts one more worker (e.g. to replace a killed one). `env` overrides its environment (another
   * DATABASE_URL, NATS_URL or coordinator address), `launcher` runs it under a command (a network
   * namespace: see SpawnOptions).
   */
  addWorker(options?: WorkerOverrides): Promise<ServiceProcess>;
  /**
   * Starts one more coordinator, on a free port unless `env` says DROVER_GRPC_ADDRESS; `env` and
   * `launcher` as for addWorker. Its address is appended to coordinatorAddresses.
   */
  addCoordinator(options?: WorkerOverrides): Promise<ServiceProcess>;
  /**
   * Starts coordinator `index` again on the address it had (stopping it first if it still runs),
   * so workers and clients pointed at it reconnect, e.g. after a test killed the leader.
   */
  restartCoordinator(index: number): Promise<ServiceProcess>;
  /** Stops workers, then coordinators, then the sandbox, each gracefully. */
  stop(): Promise<void>;
}

/**
 * The CRM sandbox, coordinators and workers as separate processes, as in production: what the demo
 * runs and what end-to-end tests kill.
 */
export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const logDir = options.logDir ?? join(REPO_ROOT, ".artifacts", "logs", options.queuePrefix);
  const sandboxArgs = Object.entries(options.sandbox).flatMap(([k, v]) => [`--${k}`, String(v)]);
  // Started alongside the coordinators (nothing of theirs needs it), awaited before the workers.
  const sandboxStarting = spawnService({
    name: "crm-sandbox",
    entry: "packages/crm-sandbox/src/main.ts",
    args: ["--port", "0", ...sandboxArgs],
    readyEvent: "listening",
    logDir,
  });
  // Awaited below; until then its failure must not count as unhandled.
  sandboxStarting.catch(() => {});
  // Authentication is on, as in production: a key pair of the cluster's own. Source secrets use the
  // keyring of the environment, else the development keyring of this checkout
  // (.artifacts/dev-secret-keys), so runs left by an earlier cluster on the same database still open.
  const admin = issueApiKey([{ kind: "admin" }], "cluster-admin");
  const worker = issueApiKey([{ kind: "worker" }], "cluster-worker");
  const settings = {
    NATS_URL: options.natsUrl,
    DROVER_QUEUE_PREFIX: options.queuePrefix,
    DROVER_LANE_WIDTH: String(options.laneWidth),
    LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
  };
  const apiKeys = [admin.key, worker.key].map(formatApiKey).join(",");
  /**
   * Every process is started from its service spec (service-spec.ts), as the manifests are rendered
   * from it: its entry point, its ready line, its settings and secrets, and its ports on loopback,
   * each 0 so that several services share this machine (the ready line names the port taken).
   */
  const spawnFromSpec = (
    spec: ServiceSpec,
    name: string,
    given: {
      secrets?: Record<string, string>;
      links?: Record<string, string>;
      /** What only this launcher sets (a worker's id, a restarted coordinator's old address, a test's overrides): wins over the rest. */
      extra?: Record<string, string>;
      /** A command the service is started under (e.g. `ip netns exec <ns>`). */
      launcher?: string[];
      runFrom?: RunFrom;
    },
  ) =>
    spawnService({
      name,
      entry: spec.entry,
      env: {
        ...serviceEnv(spec, {
          settings: Object.fromEntries(Object.entries(settings).filter(([k]) => spec.settings.includes(k))),
          secrets: given.secrets ?? {},
          links: given.links ?? {},
          host: "127.0.0.1",
          portNumber: () => 0,
        }),
        ...(spec === DASHBOARD ? {} : options.env),
        ...given.extra,
      },
      readyEvent: spec.readyEvent,
      ...(spec.nodeFlags ? { nodeFlags: spec.nodeFlags } : {}),
      logDir,
      ...(given.launcher ? { launcher: given.launcher } : {}),
      ...(given.runFrom ? { runFrom: given.runFrom } : {}),
    });
  // The keys come from DROVER_API_KEYS alone, not from a file the caller's environment may name.
  const coordinatorSecrets = { secrets: { DATABASE_URL: options.databaseUrl, DROVER_API_KEYS: apiKeys } };
  const coordinatorExtra = { DROVER_API_KEYS_FILE: "" };
  const coordinators: ServiceProcess[] = [];
  try {
    for (let i = 0; i < (options.coordinators ?? 1); i++) {
      coordinators.push(
        await spawnFromSpec(COORDINATOR, `coordinator-${i + 1}`, {
          ...coordinatorSecrets,
          extra: coordinatorExtra,
        }),
      );
    }
  } catch (err) {
    const sandbox = await sandboxStarting.catch(() => undefined);
    await Promise.all([...(sandbox ? [sandbox] : []), ...coordinators].map((p) => p.stop()));
    throw err;
  }
  let sandbox: ServiceProcess;
  try {
    sandbox = await sandboxStarting;
  } catch (err) {
    await Promise.all(coordinators.map((p) => p.stop()));
    throw err;
  }
  const coordinatorAddresses = coordinators.map((c) => String(c.ready.address));
  let workerCount = 0;
  const addWorker = (overrides: WorkerOverrides = {}) => {
    workerCount++;
    return spawnFromSpec(WORKER, `worker-${workerCount}`, {
      secrets: { DATABASE_URL: options.databaseUrl, DROVER_WORKER_TOKEN: worker.token },
      links: {
        DROVER_COORDINATOR_ADDRESS: coordinatorAddresses[(workerCount - 1) % coordinatorAddresses.length]!,
      },
      extra: { DROVER_WORKER_ID: `worker-${workerCount}`, ...overrides.env },
      ...(overrides.launcher ? { launcher: overrides.launcher } : {}),
      ...(overrides.runFrom ? { runFrom: overrides.runFrom } : {}),
    });
  };
  const started = await Promise.allSettled(Array.from({ length: options.workers }, () => addWorker()));
  const workers = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    // Leave nothing running behind a failed start.
    await Promise.all([...workers, ...coordinators, sandbox].map((p) => p.stop()));
    throw failed.reason;
  }

  let dashboard: ServiceProcess | undefined;
  if (options.dashboard) {
    try {
      dashboard = await spawnFromSpec(DASHBOARD, "dashboard", {
        links: { DROVER_COORDINATOR_ADDRESS: coordinatorAddresses[0]! },
      });
    } catch (err) {
      await Promise.all([...workers, ...coordinators, sandbox].map((p) => p.stop()));
      throw err;
    }
  }

  let stopped: Promise<void> | undefined;
  const cluster: Cluster = {
    sandboxUrl: String(sandbox.ready.url),
    coordinatorAddresses,
    adminToken: admin.token,
    sandbox,
    coordinators,
    workers,
    ...(dashboard ? { dashboard, dashboardUrl: String(dashboard.ready.url) } : {}),
    logDir,
    async addWorker(overrides) {
      const w = await addWorker(overrides);
      workers.push(w);
      return w;
    },
    async addCoordinator(overrides = {}) {
      const next = await spawnFromSpec(COORDINATOR, `coordinator-${coordinators.length + 1}`, {
        ...coordinatorSecrets,
        extra: { ...coordinatorExtra, ...overrides.env },
        ...(overrides.launcher ? { launcher: overrides.launcher } : {}),
      });
      coordinators.push(next);
      coordinatorAddresses.push(String(next.ready.address));
      return next;
    },
    async restartCoordinator(index) {
      const previous = coordinators[index];
      if (!previous) throw new Error(`the cluster has no coordinator ${index}`);
      await previous.stop();
      // The port was just freed by the exit: retry briefly if the kernel has not released it yet.
      for (let attempt = 1; ; attempt++) {
        try {
          const next = await spawnFromSpec(COORDINATOR, previous.name, {
            ...coordinatorSecrets,
            extra: { ...coordinatorExtra, DROVER_GRPC_ADDRESS: coordinatorAddresses[index]! },
          });
          coordinators[index] = next;
          return next;
        } catch (err) {
          if (attempt >= 5) throw err;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    },
    stop() {
      stopped ??= (async () => {
        await dashboard?.stop();
        await Promise.all(workers.map((w) => w.stop()));
        await Promise.all(coordinators.map((c) => c.stop()));
        await sandbox.stop();
      })();
      return stopped;
    },
  };
  return cluster;
}
