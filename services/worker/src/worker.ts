import { bearer, channelCredentials, loadSecretKeyring } from "@drover/auth";
import { ConfigError } from "@drover/config";
import { DATABASE_START_WAIT_MS, openDatabase, untilDatabaseAnswers } from "@drover/db";
import {
  type AssignmentOutcome,
  handOnSlot,
  type TaskRunnerDeps,
  undispatchTasks,
  WINDOW_IDLE_MS,
} from "@drover/engine";
import { createClient, WorkerService } from "@drover/proto";
import type { Provider } from "@drover/provider-sdk";
import { sources as defaultProviders } from "@drover/source-registry";
import {
  ensureTaskQueue,
  parseBudgetWall,
  publishTask,
  startLane,
  TaskQueueConfigError,
  taskQueueNames,
} from "@drover/task-queue";
import {
  Attr,
  createLogger,
  extractTraceContext,
  injectTraceContext,
  type Logger,
  SpanKind,
  withSpan,
} from "@drover/telemetry";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { BudgetLeases } from "./budget-leases.js";
import { checkSharedSettings, type WorkerConfig } from "./config.js";
import { CoordinatorLink } from "./coordinator-link.js";
import { ACTIVE_CONNECTIONS_RATIO, pressureGauge } from "./database-pressure.js";
import { HeldTasks } from "./held-tasks.js";
import { taskMessageHandler } from "./task-message.js";
import { WorkerLifecycle, type WorkerState } from "./worker-lifecycle.js";
import { WorkerLiveness } from "./worker-liveness.js";

export type { WorkerState } from "./worker-lifecycle.js";

export interface Worker {
  readonly id: string;
  readonly state: WorkerState;
  /**
   * Resolves with the reason once the worker failed (its queue consumer could not be re-created)
   * and has shut itself down, in state FAILED. Never resolves for a worker that was stopped.
   */
  readonly failed: Promise<Error>;
  /**
   * Graceful stop: stop pulling, let running tasks commit their window and hand themselves back
   * (cursor intact, attempt not counted, message nak'd for another worker). After the grace time
   * the worker hands back, by claim token, what it still holds, and only then closes. Calling it
   * again returns the same promise.
   */
  stop(): Promise<void>;
}

export interface WorkerOptions {
  providers?: ReadonlyMap<string, Provider>;
  logger?: Logger;
  /** Each task's outcome once its message is settled (the worker keeps none of them). */
  onOutcome?(outcome: AssignmentOutcome): void;
}

/** How long closing the broker connection may take: after a failure the broker may be the problem. */
const NATS_DRAIN_MS = 5_000;

/** Connects the worker's parts: the database, the broker, the coordinator, and a lane of task messages. */
// biome-ignore lint/complexity/noExcessiveLinesPerFunction: the worker's start, top to bottom in the order it must happen (database, settings check, queue, liveness, lanes), and the drain that undoes it in reverse; each step is a call
export async function startWorker(config: WorkerConfig, options: WorkerOptions = {}): Promise<Worker> {
  const logger = (options.logger ?? createLogger("worker")).child({ worker_id: config.workerId });
  const life = new WorkerLifecycle((from, to) => logger.info({ from, to }, `worker ${to}`));
  // Opens the runs' source secrets in the task runner, and nowhere else.
  const { keyring: secrets } = loadSecretKeyring(config.keyring);
  // Started while the database restarts: wait for it rather than exit (and be restarted in a loop).
  await untilDatabaseAnswers(config.databaseUrl, {
    onWait: (err, waitedMs) => logger.warn({ err, waited_ms: waitedMs }, "waiting for the database"),
    timeoutMs: DATABASE_START_WAIT_MS,
  });
  // One connection per lane slot, plus room for lock refreshes and the stop polls between windows.
  const database = openDatabase(config.databaseUrl, {
    max: config.laneWidth + 2,
    applicationName: "drover-worker",
    // A worker cut off mid-transaction (a claim holding the dispatch lock, a task's row) frees them on
    // the same clock as a window left idle, instead of after the kernel's keepalive (hours).
    silentClientMs: WINDOW_IDLE_MS,
  });
  const credentials = channelCredentials(config.tls);
  const coordinator = new CoordinatorLink(config.coordinatorAddress, database.db, (address) =>
    createClient(WorkerService, address, {
      // Every WorkerService call carries the worker's credential.
      metadata: () => ({ ...injectTraceContext(), ...bearer(config.token) }),
      credentials,
      // A coordinator that is starting or restarting is back within seconds: try again soon, not
      // after gRPC's default backoff (1 s at first, growing to 2 minutes), which a worker waiting
      // for its settings (DROVER_COORDINATOR_WAIT_MS) or its budget would sit out.
      channelOptions: { "grpc.initial_reconnect_backoff_ms": 100, "grpc.max_reconnect_backoff_ms": 5_000 },
    }),
  );
  // Before the queue is touched: a worker with another prefix would create a stream nobody feeds.
  await checkSharedSettings(coordinator, config, (fields, message) => logger.warn(fields, message)).catch(
    async (err) => {
      coordinator.close();
      await database.close();
      throw err;
    },
  );
  const nc = await connect({
    servers: config.natsServers,
    name: `drover-worker-${config.workerId}`,
    maxReconnectAttempts: -1,
  });
  const names = taskQueueNames(config.queuePrefix);
  const jsm = await jetstreamManager(nc);
  const queueOptions = { replicas: config.streamReplicas };
  await ensureTaskQueue(jsm, names, queueOptions).catch(async (err) => {
    await nc.close();
    coordinator.close();
    await database.close();
    // A stream kept at another replica count is a setting to fix (exit code 2), not a crash.
    throw err instanceof TaskQueueConfigError ? new ConfigError([err.message]) : err;
  });
  // Registered before the lane pulls, so every claim this worker makes names a live record.
  const liveness = new WorkerLiveness({
    databaseUrl: config.databaseUrl,
    workerId: config.workerId,
    laneWidth: config.laneWidth,
    livenessMs: config.livenessMs,
    logger,
  });
  try {
    await liveness.start();
  } catch (err) {
    await liveness.stop();
    await nc.close().catch(() => {});
    coordinator.close();
    await database.close();
    throw err;
  }
  const shutdown = new AbortController();
  const held = new HeldTasks();
  const js = jetstream(nc);

  const budgets = new BudgetLeases(coordinator, config.workerId);
  // A 429 seen by any worker walls the account off for all of them until the source's reset.
  const walls = nc.subscribe(names.budgetWallSubject, {
    callback: (err, msg) => {
      const wall = err ? undefined : parseBudgetWall(msg.data);
      if (wall) budgets.wall(wall.source, wall.account, wall.until);
    },
  });
  const runner: TaskRunnerDeps = {
    pacerFor: (run) => budgets.for(run.source, run.sourceAccount, run.id),
    db: database.db,
    providers: options.providers ?? defaultProviders,
    workerId: config.workerId,
    maxAttempts: config.maxAttempts,
    notesCap: config.notesCap,
    windowDeadlineMs: config.windowDeadlineMs,
    destinationProbeMs: config.destinationProbeMs,
    revertWindowSize: config.revertWindowSize,
    touchEveryMs: config.taskTouchMs,
    workerRecord: () => liveness.record,
    secrets,
    // The finish of a succeeded task hands its slot on in its own commit; the handler publishes.
    handOnAtFinish: true,
  };
  const handle = taskMessageHandler({
    runner,
    pressure: pressureGauge(database.db, {
      query: config.pressure.query ?? ACTIVE_CONNECTIONS_RATIO,
      threshold: config.pressure.threshold,
    }),
    pressureDeferMs: config.pressure.deferMs,
    shutdown: shutdown.signal,
    held,
    async handOnSlot(runId, marked) {
      const next = marked ?? (await handOnSlot(database.db, runId));
      if (next.ids.length === 0) return;
      const failed: number[] = [];
      await withSpan(
        "dispatch",
        { [Attr.runId]: runId, "drover.dispatched": next.ids.length, "drover.handed_on": true },
        async () => {
          const headers = injectTraceContext();
          for (const taskId of next.ids)
            await publishTask(js, names, { taskId, runId }, headers).catch(() => failed.push(taskId));
        },
        { parent: extractTraceContext(next.traceContext ?? {}), kind: SpanKind.PRODUCER },
      );
      // Unmarked, the coordinator's next round publishes them.
      if (failed.length > 0) await undispatchTasks(database.db, failed);
    },
    reportFinished: (task) =>
      coordinator.taskFinished(
        { taskId: String(task.taskId), runId: task.runId, outcome: task.outcome, phase: task.phase },
        { deadline: new Date(Date.now() + 5_000) },
      ),
    logger,
    onOutcome: options.onOutcome,
  });

  const lane = await startLane(js, names, {
    width: config.laneWidth,
    handle,
    ensure: () => ensureTaskQueue(jsm, names, queueOptions),
    recoverForMs: config.consumerRecoveryMs,
    onError: (err) => logger.error({ err }, "task handling failed; message will be redelivered"),
  });
  life.moveTo("RUNNING");
  logger.info({ lane: config.laneWidth, queue: names.stream }, "worker pulling");

  /** The staged shutdown, for a requested stop and for a failure alike. */
  let ended: Promise<void> | undefined;
  const end = (failure?: Error) => {
    ended ??= (async () => {
      life.moveTo("STOPPING");
      const grace = new Promise<"over">((r) => setTimeout(() => r("over"), config.shutdownGraceMs).unref());
      shutdown.abort(new Error("worker shutting down"));
      await lane.stopPulling();
      life.moveTo("DRAINING");
      if ((await Promise.race([lane.drain(), grace])) === "over" && held.size > 0) {
        // These would otherwise wait out the reaper's stale threshold with nobody working on them.
        const handedBack = await held.handBack(database.db).catch((err) => {
          logger.error({ err }, "handing back after the grace time failed; the reaper will release them");
          return [];
        });
        logger.warn({ handed_back: handedBack, still_held: held.size }, "grace time over; handed back");
      }
      life.moveTo("DRAINED");
      // Holds nothing now (or handed back what it could; the reaper releases the rest at once).
      await liveness.stop();
      walls.unsubscribe();
      await budgets.flush();
      coordinator.close();
      await closeNats();
      await database.close();
      life.moveTo(failure ? "FAILED" : "STOPPED");
    })();
    return ended;
  };
  const closeNats = async () => {
    const drained = nc.drain().then(
      () => "drained",
      () => "failed",
    );
    const late = new Promise<string>((r) => setTimeout(() => r("late"), NATS_DRAIN_MS).unref());
    if ((await Promise.race([drained, late])) !== "drained") await nc.close().catch(() => {});
  };
  const failed = lane.failed.then(async (err) => {
    logger.error({ err }, "the task queue's consumer could not be re-created; the worker stops");
    await end(err).catch((e) => logger.error({ err: e }, "shutting down after the failure failed"));
    return err;
  });

  return {
    id: config.workerId,
    get state() {
      return life.state;
    },
    failed,
    stop: () => end(),
  };
}
