import { hostname } from "node:os";
import { ConfigError } from "@drover/config";
import {
  DATABASE_START_WAIT_MS,
  ensureDatabase,
  migrateDatabase,
  openDatabase,
  untilDatabaseAnswers,
} from "@drover/db";
import {
  addService,
  type CallContext,
  createHealthService,
  Health,
  RunService,
  startServer,
  WorkerService,
} from "@drover/proto";
import { type Provider, sleep } from "@drover/provider-sdk";
import { sources as defaultProviders } from "@drover/source-registry";
import {
  ensureTaskQueue,
  ensureWebhookEventStream,
  publishBudgetWall,
  publishVerification,
  TaskQueueConfigError,
  taskQueueNames,
  webhookEventNames,
} from "@drover/task-queue";
import {
  createLogger,
  extractTraceContext,
  injectTraceContext,
  type Logger,
  SpanKind,
  withSpan,
} from "@drover/telemetry";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { DevKeys } from "./api-key-store.js";
import { auditInterceptor } from "./audit-interceptor.js";
import { authInterceptor } from "./auth.js";
import { BudgetKeeper, DEFAULT_BUDGET_OPTIONS } from "./budget-keeper.js";
import type { CoordinatorConfig } from "./config.js";
import type { CoordinatorContext } from "./context.js";
import { coalescedDispatch } from "./dispatcher.js";
import { FollowEvents } from "./follow-events.js";
import { type LeaderLease, leaderLease } from "./leader-lease.js";
import { reaperPass } from "./reaper.js";
import { domainErrorsAtEdge } from "./rpc-status.js";
import { runService } from "./run-service.js";
import { RunWebhooks } from "./run-webhooks.js";
import { prepareSecurity } from "./security.js";
import { refreshTaskMetrics } from "./task-metrics.js";
import { Verifications } from "./verification-dispatch.js";
import { workerService } from "./worker-service.js";

export interface Coordinator {
  /** host:port the gRPC server listens on. */
  address: string;
  /** True while this replica holds the leader lease and runs the reaper. */
  isLeader(): boolean;
  /** Stops taking RPCs, finishes those in flight up to the grace time, releases leadership. Idempotent. */
  stop(): Promise<void>;
}

export interface CoordinatorOptions {
  providers?: ReadonlyMap<string, Provider>;
  logger?: Logger;
  /**
   * Receives the development keys generated at a deployment's very first start (no key configured
   * or stored), the only time their tokens exist. Default: one JSON line on stdout,
   * `{"event":"dev-keys","admin":"...","worker":"..."}`.
   */
  onDevKeys?: (keys: DevKeys) => void;
}

// biome-ignore lint/complexity/noExcessiveLinesPerFunction: the coordinator's start, top to bottom in the order it must happen (database, keys, queue, RPC server, leader loop), and the stop that undoes it in reverse; each step is a call
export async function startCoordinator(
  config: CoordinatorConfig,
  options: CoordinatorOptions = {},
): Promise<Coordinator> {
  const logger = options.logger ?? createLogger("coordinator");
  // Started while the database restarts (a deploy of both, a failover): wait for it, not exit.
  await untilDatabaseAnswers(config.databaseUrl, {
    database: "postgres",
    onWait: (err, waitedMs) => logger.warn({ err, waited_ms: waitedMs }, "waiting for the database"),
    timeoutMs: DATABASE_START_WAIT_MS,
  });
  await ensureDatabase(config.databaseUrl);
  await migrateDatabase(config.databaseUrl);
  const database = openDatabase(config.databaseUrl, {
    max: 10,
    applicationName: "drover-coordinator",
    // A coordinator cut off mid-transaction (holding the dispatch lock, a run's row) must not stall
    // the others longer than it takes them to replace it as leader.
    silentClientMs: config.leaderTimeoutMs,
  });
  const security = await prepareSecurity(config, database.db, logger).catch(async (err) => {
    await database.close();
    throw err;
  });
  if (security.devKeys) {
    (options.onDevKeys ?? printDevKeys)(security.devKeys);
  }
  const nc = await connect({
    servers: config.natsServers,
    name: "drover-coordinator",
    maxReconnectAttempts: -1,
  });
  const names = taskQueueNames(config.queuePrefix);
  const jsm = await jetstreamManager(nc);
  const queueOptions = { replicas: config.streamReplicas };
  await ensureTaskQueue(jsm, names, queueOptions).catch(async (err) => {
    await nc.close();
    await database.close();
    // A stream kept at another replica count is a setting to fix (exit code 2), not a crash.
    throw err instanceof TaskQueueConfigError ? new ConfigError([err.message]) : err;
  });
  const js = jetstream(nc);
  // The source's change events, stored by the receiver (services/receiver), become work here.
  const eventNames = webhookEventNames(config.queuePrefix);
  await ensureWebhookEventStream(jsm, eventNames, queueOptions).catch(async (err) => {
    await nc.close();
    await database.close();
    throw err instanceof TaskQueueConfigError ? new ConfigError([err.message]) : err;
  });
  // Slots already leased before a 429 must not be used: every worker hears of the wall at once.
  const budgets = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, Date.now, (source, account, until) =>
    publishBudgetWall(nc, names, { source, account, until }),
  );
  let lease: LeaderLease | undefined;

  const ctx: CoordinatorContext = {
    budgets,
    isLeader: () => lease?.held === true,
    db: database.db,
    config,
    clientCredentials: security.clientCredentials,
    providers: options.providers ?? defaultProviders,
    logger,
    dispatch: coalescedDispatch({
      db: database.db,
      js,
      names,
      laneWidth: config.laneWidth,
      tenantCap: config.tenantMaxInflight,
      fairShare: config.fairShare,
      slices: config.dispatchSlices,
      ensureQueue: () => ensureTaskQueue(jsm, names, queueOptions),
    }),
  };

  const health = createHealthService();
  const server = await startServer({
    address: config.grpcAddress,
    credentials: security.serverCredentials,
  });
  // Every RunService and WorkerService call is authenticated and checked against its scopes;
  // the health service is registered without it and stays open.
  const authorize = authInterceptor(security.authenticator, logger);
  // Run-changing calls are recorded in the audit trail around the check, so refusals are recorded too.
  const audit = auditInterceptor(database.db, logger);
  const serviceOptions = {
    // One span per RPC, continuing the caller's trace from its metadata.
    interceptor: <T>(call: CallContext, next: () => Promise<T>, request: () => unknown) =>
      withSpan(
        call.method,
        { "rpc.system": "grpc", "rpc.method": call.method },
        () =>
          audit(call, () => authorize(call, () => domainErrorsAtEdge(call, next, request), request), request),
        {
          parent: extractTraceContext({ ...call.metadata }),
          kind: SpanKind.SERVER,
        },
      ),
    onUnexpectedError: (err: unknown, call: { method: string }) =>
      logger.error({ err, method: call.method }, "RPC failed"),
  };
  // Finished runs are verified by workers (where source credentials are opened): asked for by the
  // leader's reaper pass or by VerifyRun, and published on the task queue.
  const verifications = new Verifications(ctx, (runId) =>
    publishVerification(js, names, runId, injectTraceContext()),
  );
  addService(server.server, RunService, runService(ctx, security.secrets, verifications), serviceOptions);
  const runWebhooks = new RunWebhooks(ctx, security.secrets);
  addService(server.server, WorkerService, workerService(ctx), serviceOptions);
  addService(server.server, Health, health.implementation);
  health.setStatus("", "SERVING");
  health.setStatus(RunService.typeName, "SERVING");
  health.setStatus(WorkerService.typeName, "SERVING");

  const address = `${config.grpcAddress.split(":")[0]}:${server.port}`;
  const leader = leaderLease(
    config.databaseUrl,
    { holder: `${hostname()}-${process.pid}`, address },
    { timeoutMs: config.leaderTimeoutMs },
  );
  lease = leader;
  let stopping = false;
  let reaping: Promise<void> = Promise.resolve();
  // The lease is checked on a chain of its own: a reaper pass stuck on an unreachable database must
  // not keep a cut-off leader from noticing (refresh gives up on its own) that it lost the lease.
  let leasing: Promise<void> = Promise.resolve();
  let leading = false;
  const checkLease = async () => {
    const held = await leader.refresh();
    if (held === leading) return;
    leading = held;
    budgets.clear();
    if (held) logger.info("took the leader lease; running the reaper and keeping source budgets here");
    else logger.warn("lost the leader lease");
  };
  const pass = async () => {
    if (!leader.held) return;
    await budgets.persist();
    const report = await reaperPass(ctx);
    if (report.deadWorkers.length > 0)
      logger.warn(
        { workers: report.deadWorkers },
        "workers stopped heartbeating (liveness record expired); their tasks were handed on",
      );
    if (report.released + report.failed + report.redispatched > 0)
      logger.info(report, "reaper repaired tasks");
    await verifications.pass().catch((err) => logger.error({ err }, "asking for verifications failed"));
    await runWebhooks.sweep().catch((err) => logger.error({ err }, "sweeping follow runs' webhooks failed"));
  };
  const stopTaskMetrics = refreshTaskMetrics(database.db);
  const tick = () => {
    if (stopping) return;
    leasing = leasing.then(checkLease).catch((err) => logger.error({ err }, "lease check failed"));
    const checked = leasing;
    reaping = reaping
      .then(() => checked)
      .then(pass)
      .catch((err) => logger.error({ err }, "reaper pass failed"));
  };
  const timer = setInterval(tick, config.reaperIntervalMs);
  // At once, not an interval from now: a cluster's first coordinator (or one started where the lease
  // is free) leads, serves budget leases and reaps from its start; runs started meanwhile would wait.
  tick();
  // On its own loop, not the reaper's tick: an event waits at most its fetch (a second), so a
  // change at the source is work within seconds (follow-events.ts).
  const followEvents = new FollowEvents(ctx, js, eventNames);
  const following = (async () => {
    while (!stopping) {
      if (!leader.held) {
        await sleep(500);
        continue;
      }
      await followEvents.pass().catch(async (err) => {
        logger.error({ err }, "turning webhook events into work failed");
        await sleep(1_000);
      });
    }
  })();

  logger.info({ address, queue: names.stream }, "coordinator listening");

  let stopped: Promise<void> | undefined;
  return {
    address,
    isLeader: () => leader.held,
    stop() {
      stopped ??= (async () => {
        stopping = true;
        clearInterval(timer);
        stopTaskMetrics();
        health.setStatus("", "NOT_SERVING");
        // VerifyRuns waiting on a worker answer UNAVAILABLE now rather than hold the shutdown.
        verifications.stop();
        await server.shutdown(config.shutdownGraceMs);
        await reaping.catch(() => {});
        await leasing.catch(() => {});
        await following;
        if (leader.held)
          await budgets.persist(true).catch((err) => logger.error({ err }, "persisting budgets failed"));
        await leader.release();
        await nc.drain().catch(() => {});
        await database.close();
        logger.info("coordinator stopped");
      })();
      return stopped;
    },
  };
}

function printDevKeys(keys: DevKeys): void {
  process.stdout.write(`${JSON.stringify({ event: "dev-keys", admin: keys.admin, worker: keys.worker })}\n`);
}
