import { join } from "node:path";
import { REPO_ROOT, type ServiceProcess, spawnService } from "./service-process.js";

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
}

export interface Cluster {
  sandboxUrl: string;
  coordinatorAddresses: string[];
  sandbox: ServiceProcess;
  coordinators: ServiceProcess[];
  workers: ServiceProcess[];
  logDir: string;
  /** Starts one more worker (e.g. to replace a killed one). */
  addWorker(): Promise<ServiceProcess>;
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
  const sandbox = await spawnService({
    name: "crm-sandbox",
    entry: "packages/crm-sandbox/src/main.ts",
    args: ["--port", "0", ...sandboxArgs],
    readyEvent: "listening",
    logDir,
  });
  const common = {
    DATABASE_URL: options.databaseUrl,
    NATS_URL: options.natsUrl,
    DROVER_QUEUE_PREFIX: options.queuePrefix,
    DROVER_LANE_WIDTH: String(options.laneWidth),
    LOG_LEVEL: process.env.LOG_LEVEL ?? "info",
    ...options.env,
  };
  const coordinators: ServiceProcess[] = [];
  try {
    for (let i = 0; i < (options.coordinators ?? 1); i++) {
      coordinators.push(
        await spawnService({
          name: `coordinator-${i + 1}`,
          entry: "services/coordinator/src/main.ts",
          env: { ...common, DROVER_GRPC_ADDRESS: "127.0.0.1:0" },
          readyEvent: "listening",
          logDir,
        }),
      );
    }
  } catch (err) {
    await Promise.all([sandbox, ...coordinators].map((p) => p.stop()));
    throw err;
  }
  const coordinatorAddresses = coordinators.map((c) => String(c.ready.address));
  let workerCount = 0;
  const addWorker = () => {
    workerCount++;
    return spawnService({
      name: `worker-${workerCount}`,
      entry: "services/worker/src/main.ts",
      env: {
        ...common,
        DROVER_WORKER_ID: `worker-${workerCount}`,
        DROVER_COORDINATOR_ADDRESS: coordinatorAddresses[(workerCount - 1) % coordinatorAddresses.length]!,
      },
      readyEvent: "pulling",
      logDir,
    });
  };
  const workers = await Promise.all(Array.from({ length: options.workers }, () => addWorker()));

  let stopped: Promise<void> | undefined;
  const cluster: Cluster = {
    sandboxUrl: String(sandbox.ready.url),
    coordinatorAddresses,
    sandbox,
    coordinators,
    workers,
    logDir,
    async addWorker() {
      const w = await addWorker();
      workers.push(w);
      return w;
    },
    stop() {
      stopped ??= (async () => {
        await Promise.all(workers.map((w) => w.stop()));
        await Promise.all(coordinators.map((c) => c.stop()));
        await sandbox.stop();
      })();
      return stopped;
    },
  };
  return cluster;
}
