import { ensureDatabase, migrateDatabase, openDatabase } from "@drover/db";
import {
  addService,
  createHealthService,
  Health,
  RunService,
  startServer,
  WorkerService,
} from "@drover/proto";
import type { Provider } from "@drover/provider-sdk";
import { providers as defaultProviders } from "@drover/providers";
import { ensureTaskQueue, taskQueueNames } from "@drover/task-queue";
import { createLogger, extractTraceContext, type Logger, SpanKind, withSpan } from "@drover/telemetry";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { CoordinatorConfig } from "./config.js";
import type { CoordinatorContext } from "./context.js";
import { topUpRun } from "./dispatcher.js";
import { leaderLease } from "./leader-lease.js";
import { sweep } from "./reaper.js";
import { runService } from "./run-service.js";
import { workerService } from "./worker-service.js";

export interface Coordinator {
  /** host:port the gRPC server listens on. */
  address: string;
  /** True while this replica holds the leader lease and runs the reaper. */
  isLeader(): boolean;
  /** Runs one reaper pass now (tests). */
  sweepNow(): Promise<void>;
  /** Stops taking RPCs, finishes those in flight up to the grace time, releases leadership. Idempotent. */
  stop(): Promise<void>;
}

export interface CoordinatorOptions {
  providers?: ReadonlyMap<string, Provider>;
  logger?: Logger;
}

export async function startCoordinator(
  config: CoordinatorConfig,
  options: CoordinatorOptions = {},
): Promise<Coordinator> {
  const logger = options.logger ?? createLogger("coordinator");
  await ensureDatabase(config.DATABASE_URL);
  await migrateDatabase(config.DATABASE_URL);
  const database = openDatabase(config.DATABASE_URL, { max: 10, applicationName: "drover-coordinator" });
  const nc = await connect({
    servers: config.NATS_URL,
    name: "drover-coordinator",
    maxReconnectAttempts: -1,
  });
  const names = taskQueueNames(config.DROVER_QUEUE_PREFIX);
  const jsm = await jetstreamManager(nc);
  await ensureTaskQueue(jsm, names);
  const js = jetstream(nc);

  const ctx: CoordinatorContext = {
    db: database.db,
    config,
    providers: options.providers ?? defaultProviders,
    logger,
    topUp: (runId) =>
      topUpRun(
        {
          db: database.db,
          js,
          names,
          maxInflight: 2 * config.DROVER_LANE_WIDTH,
          ensureQueue: () => ensureTaskQueue(jsm, names),
        },
        runId,
      ),
  };

  const health = createHealthService();
  const server = await startServer({ address: config.DROVER_GRPC_ADDRESS });
  const serviceOptions = {
    // One span per RPC, continuing the caller's trace from its metadata.
    interceptor: <T>(
      call: { method: string; metadata: Readonly<Record<string, string>> },
      next: () => Promise<T>,
    ) =>
      withSpan(call.method, { "rpc.system": "grpc", "rpc.method": call.method }, () => next(), {
        parent: extractTraceContext({ ...call.metadata }),
        kind: SpanKind.SERVER,
      }),
    onUnexpectedError: (err: unknown, call: { method: string }) =>
      logger.error({ err, method: call.method }, "RPC failed"),
  };
  addService(server.server, RunService, runService(ctx), serviceOptions);
  addService(server.server, WorkerService, workerService(ctx), serviceOptions);
  addService(server.server, Health, health.implementation);
  health.setStatus("", "SERVING");
  health.setStatus(RunService.typeName, "SERVING");
  health.setStatus(WorkerService.typeName, "SERVING");

  const lease = leaderLease(config.DATABASE_URL);
  let stopping = false;
  let sweeping: Promise<void> = Promise.resolve();
  const pass = async () => {
    const wasLeader = lease.held;
    if (!(await lease.refresh())) {
      if (wasLeader) logger.warn("lost the leader lease");
      return;
    }
    if (!wasLeader) logger.info("took the leader lease; running the reaper here");
    const report = await sweep(ctx);
    if (report.released + report.failed + report.redispatched > 0)
      logger.info(report, "reaper repaired tasks");
  };
  const timer = setInterval(() => {
    if (stopping) return;
    sweeping = sweeping.then(pass).catch((err) => logger.error({ err }, "reaper pass failed"));
  }, config.DROVER_SWEEP_INTERVAL_MS);

  const address = `${config.DROVER_GRPC_ADDRESS.split(":")[0]}:${server.port}`;
  logger.info({ address, queue: names.stream }, "coordinator listening");

  let stopped: Promise<void> | undefined;
  return {
    address,
    isLeader: () => lease.held,
    sweepNow: async () => {
      sweeping = sweeping.then(pass);
      await sweeping;
    },
    stop() {
      stopped ??= (async () => {
        stopping = true;
        clearInterval(timer);
        health.setStatus("", "NOT_SERVING");
        await server.shutdown(config.DROVER_SHUTDOWN_GRACE_MS);
        await sweeping.catch(() => {});
        await lease.release();
        await nc.drain().catch(() => {});
        await database.close();
        logger.info("coordinator stopped");
      })();
      return stopped;
    },
  };
}
