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
  /** The sandbox's flags, e.g. { persons: 4000, "malformed-rate": 0.01 } for the CRM (Pipedrive) one. */
  sandbox: Record<string, string | number>;
  /** Which source's sandbox to start: the CRM (Pipedrive) one unless told; `hubspot` for HubSpot's. */
  sandboxSource?: SandboxSource;
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
 * How each process of one cluster starts, from its service spec, with the cluster's keys: the
 * coordinators hold the keys' hashes, the workers a worker token, and `adminToken` is for callers.
 */
interface ClusterServices {
  adminToken: string;
  /** `extra`: environment only this coordinator gets (a test's overrides, a restarted one's old address). */
  coordinator(name: string, extra?: Record<string, string>, launcher?: string[]): Promise<ServiceProcess>;
  /** Worker `number`, pointed at one coordinator. */
  worker(number: number, coordinatorAddress: string, overrides: WorkerOverrides): Promise<ServiceProcess>;
  dashboard(coordinatorAddress: string): Promise<ServiceProcess>;
}

function clusterServices(options: ClusterOptions, logDir: string): ClusterServices {
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
  return {
    adminToken: admin.token,
    coordinator: (name, extra = {}, launcher) =>
      spawnFromSpec(COORDINATOR, name, {
        secrets: { DATABASE_URL: options.databaseUrl, DROVER_API_KEYS: apiKeys },
        // The keys come from DROVER_API_KEYS alone, not from a file the caller's environment may name.
        extra: { DROVER_API_KEYS_FILE: "", ...extra },
        ...(launcher ? { launcher } : {}),
      }),
    worker: (number, coordinatorAddress, overrides) =>
      spawnFromSpec(WORKER, `worker-${number}`, {
        secrets: { DATABASE_URL: options.databaseUrl, DROVER_WORKER_TOKEN: worker.token },
        links: { DROVER_COORDINATOR_ADDRESS: coordinatorAddress },
        extra: { DROVER_WORKER_ID: `worker-${number}`, ...overrides.env },
        ...(overrides.launcher ? { launcher: overrides.launcher } : {}),
        ...(overrides.runFrom ? { runFrom: overrides.runFrom } : {}),
      }),
    dashboard: (coordinatorAddress) =>
      spawnFromSpec(DASHBOARD, "dashboard", { links: { DROVER_COORDINATOR_ADDRESS: coordinatorAddress } }),
  };
}

/** Stops every process given, at once: what a failed start does so that it leaves nothing running. */
async function stopAll(processes: ServiceProcess[]): Promise<void> {
  await Promise.all(processes.map((p) => p.stop()));
}

export type SandboxSource = "crm" | "hubspot";

const SANDBOX_ENTRIES: Readonly<Record<SandboxSource, string>> = {
  crm: "packages/crm-sandbox/src/main.ts",
  hubspot: "packages/hubspot-sandbox/src/main.ts",
};

/** The source's sandbox, started with its flags; awaited later, its failure is not unhandled meanwhile. */
function startSandbox(options: ClusterOptions, logDir: string): Promise<ServiceProcess> {
  const source = options.sandboxSource ?? "crm";
  const sandboxArgs = Object.entries(options.sandbox).flatMap(([k, v]) => [`--${k}`, String(v)]);
  const sandboxStarting = spawnService({
    name: `${source}-sandbox`,
    entry: SANDBOX_ENTRIES[source],
    args: ["--port", "0", ...sandboxArgs],
    readyEvent: "listening",
    logDir,
  });
  // Awaited by the caller; until then its failure must not count as unhandled.
  sandboxStarting.catch(() => {});
  return sandboxStarting;
}

/** The coordinators one after another, then the sandbox started beside them. */
async function startCoordinators(
  services: ClusterServices,
  count: number,
  sandboxStarting: Promise<ServiceProcess>,
): Promise<{ coordinators: ServiceProcess[]; sandbox: ServiceProcess }> {
  const coordinators: ServiceProcess[] = [];
  try {
    for (let i = 0; i < count; i++) coordinators.push(await services.coordinator(`coordinator-${i + 1}`));
  } catch (err) {
    const sandbox = await sandboxStarting.catch(() => undefined);
    await stopAll([...(sandbox ? [sandbox] : []), ...coordinators]);
    throw err;
  }
  try {
    return { coordinators, sandbox: await sandboxStarting };
  } catch (err) {
    await stopAll(coordinators);
    throw err;
  }
}

/** `count` workers at once; if one fails, every process started so far is stopped. */
async function startWorkers(
  count: number,
  addWorker: () => Promise<ServiceProcess>,
  others: ServiceProcess[],
): Promise<ServiceProcess[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => addWorker()));
  const workers = started.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    // Leave nothing running behind a failed start.
    await stopAll([...workers, ...others]);
    throw failed.reason;
  }
  return workers;
}

/** The run page, pointed at the first coordinator; if it fails, every other process is stopped. */
async function startDashboard(
  services: ClusterServices,
  coordinatorAddress: string,
  others: ServiceProcess[],
): Promise<ServiceProcess> {
  try {
    return await services.dashboard(coordinatorAddress);
  } catch (err) {
    await stopAll(others);
    throw err;
  }
}

/**
 * The CRM sandbox, coordinators and workers as separate processes, as in production: what the demo
 * runs and what end-to-end tests kill.
 */
export async function startCluster(options: ClusterOptions): Promise<Cluster> {
  const logDir = options.logDir ?? join(REPO_ROOT, ".artifacts", "logs", options.queuePrefix);
  // Started alongside the coordinators (nothing of theirs needs it), awaited before the workers.
  const sandboxStarting = startSandbox(options, logDir);
  const services = clusterServices(options, logDir);
  const { coordinators, sandbox } = await startCoordinators(
    services,
    options.coordinators ?? 1,
    sandboxStarting,
  );
  const coordinatorAddresses = coordinators.map((c) => String(c.ready.address));
  let workerCount = 0;
  // Each new worker is pointed at the next coordinator, round the list.
  const addWorker = (overrides: WorkerOverrides = {}) => {
    workerCount++;
    const address = coordinatorAddresses[(workerCount - 1) % coordinatorAddresses.length]!;
    return services.worker(workerCount, address, overrides);
  };
  const workers = await startWorkers(options.workers, () => addWorker(), [...coordinators, sandbox]);
  const dashboard = options.dashboard
    ? await startDashboard(services, coordinatorAddresses[0]!, [...workers, ...coordinators, sandbox])
    : undefined;
  return runningCluster({
    services,
    addWorker,
    logDir,
    sandbox,
    coordinators,
    coordinatorAddresses,
    workers,
    dashboard,
  });
}

/** The started processes as a Cluster: it adds and restarts processes, and stops them all once. */
function runningCluster(parts: {
  services: ClusterServices;
  addWorker: (overrides?: WorkerOverrides) => Promise<ServiceProcess>;
  logDir: string;
  sandbox: ServiceProcess;
  coordinators: ServiceProcess[];
  coordinatorAddresses: string[];
  workers: ServiceProcess[];
  dashboard: ServiceProcess | undefined;
}): Cluster {
  const { services, sandbox, coordinators, coordinatorAddresses, workers, dashboard } = parts;
  let stopped: Promise<void> | undefined;
  return {
    sandboxUrl: String(sandbox.ready.url),
    coordinatorAddresses,
    adminToken: services.adminToken,
    sandbox,
    coordinators,
    workers,
    ...(dashboard ? { dashboard, dashboardUrl: String(dashboard.ready.url) } : {}),
    logDir: parts.logDir,
    async addWorker(overrides) {
      const w = await parts.addWorker(overrides);
      workers.push(w);
      return w;
    },
    async addCoordinator(overrides = {}) {
      const name = `coordinator-${coordinators.length + 1}`;
      const next = await services.coordinator(name, overrides.env, overrides.launcher);
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
          const next = await services.coordinator(previous.name, {
            DROVER_GRPC_ADDRESS: coordinatorAddresses[index]!,
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
}
