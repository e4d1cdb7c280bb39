import { bearer, channelCredentials, loadSecretKeyring } from "@drover/auth";
import { openDatabase } from "@drover/db";
import { type AssignmentOutcome, runAssignment, runVerification } from "@drover/engine";
import { createClient, WorkerService } from "@drover/proto";
import type { Provider } from "@drover/provider-sdk";
import { providers as defaultProviders } from "@drover/providers";
import {
  ensureTaskQueue,
  isVerificationAssignment,
  parseAssignment,
  startLane,
  taskQueueNames,
  type VerificationAssignment,
} from "@drover/task-queue";
import {
  Attr,
  createLogger,
  extractTraceContext,
  injectTraceContext,
  type Logger,
  metrics,
  SpanKind,
  withSpan,
} from "@drover/telemetry";
import type { JsMsg } from "@nats-io/jetstream";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { WorkerConfig } from "./config.js";
import { CoordinatorLink } from "./coordinator-link.js";
import { ACTIVE_CONNECTIONS_RATIO, pressureGauge } from "./database-pressure.js";
import { SourceBudgets } from "./source-budget.js";

const deferrals = metrics.counter(
  "drover_worker_deferrals_total",
  "Task messages deferred because the database was under pressure",
);
const taskOutcomes = metrics.counter("drover_worker_tasks_total", "Task attempts by outcome", ["outcome"]);
const verificationOutcomes = metrics.counter(
  "drover_worker_verifications_total",
  "Verification attempts by outcome",
  ["outcome"],
);

export type WorkerState = "running" | "draining" | "stopped";

export interface Worker {
  readonly id: string;
  readonly state: WorkerState;
  /** Outcomes of the tasks this worker ran, newest last (tests and the demo read them). */
  readonly outcomes: readonly AssignmentOutcome[];
  /**
   * Graceful stop: stop pulling, let running tasks commit their window and hand themselves back
   * (cursor intact, attempt not counted, message nak'd for another worker), then close.
   * After the grace time it stops waiting. Idempotent.
   */
  stop(): Promise<void>;
}

export interface WorkerOptions {
  providers?: ReadonlyMap<string, Provider>;
  logger?: Logger;
}

/** Outcomes after which the run may move on: the coordinator hears of them at once. */
const REPORTED = new Set(["succeeded", "failed", "cancelled"]);

export async function startWorker(config: WorkerConfig, options: WorkerOptions = {}): Promise<Worker> {
  const logger = (options.logger ?? createLogger("worker")).child({ worker_id: config.DROVER_WORKER_ID });
  // Opens the runs' source secrets in the task runner, and nowhere else.
  const { keyring: secrets } = loadSecretKeyring({
    keys: config.DROVER_SECRET_KEYS,
    file: config.DROVER_SECRET_KEYS_FILE,
    production: config.NODE_ENV === "production",
  });
  // One connection per lane slot, plus room for lock refreshes and the stop polls between windows.
  const database = openDatabase(config.DATABASE_URL, {
    max: config.DROVER_LANE_WIDTH + 2,
    applicationName: "drover-worker",
  });
  const nc = await connect({
    servers: config.NATS_URL,
    name: `drover-worker-${config.DROVER_WORKER_ID}`,
    maxReconnectAttempts: -1,
  });
  const names = taskQueueNames(config.DROVER_QUEUE_PREFIX);
  const jsm = await jetstreamManager(nc);
  await ensureTaskQueue(jsm, names);
  const credentials = channelCredentials({
    caFile: config.DROVER_TLS_CA_FILE,
    certFile: config.DROVER_TLS_CLIENT_CERT_FILE,
    keyFile: config.DROVER_TLS_CLIENT_KEY_FILE,
  });
  const coordinator = new CoordinatorLink(config.DROVER_COORDINATOR_ADDRESS, database.db, (address) =>
    createClient(WorkerService, address, {
      // Every WorkerService call carries the worker's credential.
      metadata: () => ({ ...injectTraceContext(), ...bearer(config.DROVER_WORKER_TOKEN) }),
      credentials,
    }),
  );
  const shutdown = new AbortController();
  const outcomes: AssignmentOutcome[] = [];
  let state: WorkerState = "running";

  const budgets = new SourceBudgets(coordinator, config.DROVER_WORKER_ID);
  // A 429 seen by any worker walls the account off for all of them until the source's reset.
  const walls = nc.subscribe(names.budgetWallSubject, {
    callback: (err, msg) => {
      if (err) return;
      try {
        const wall = JSON.parse(new TextDecoder().decode(msg.data)) as {
          source: string;
          account: string;
          until: number;
        };
        if (typeof wall.until === "number") budgets.wall(wall.source, wall.account, wall.until);
      } catch {
        // not a wall announcement
      }
    },
  });
  const deps = {
    pacerFor: (run: { source: string; sourceAccount: string }) => budgets.for(run.source, run.sourceAccount),
    db: database.db,
    providers: options.providers ?? defaultProviders,
    workerId: config.DROVER_WORKER_ID,
    maxAttempts: config.DROVER_MAX_ATTEMPTS,
    notesCap: config.DROVER_NOTES_CAP,
    windowDeadlineMs: config.DROVER_WINDOW_DEADLINE_MS,
    secrets,
  };

  const pressure = pressureGauge(database.db, {
    query: config.DROVER_PRESSURE_QUERY ?? ACTIVE_CONNECTIONS_RATIO,
    threshold: config.DROVER_PRESSURE_THRESHOLD,
  });

  const handle = async (msg: JsMsg) => {
    const assignment = parseAssignment(msg.data);
    if (!assignment) {
      msg.term("not a task assignment");
      return;
    }
    if (await pressure.underPressure()) {
      // Before the claim, so nothing is held: the message comes back after the delay.
      deferrals.inc({});
      logger.info({ assignment, pressure: pressure.lastValue }, "database under pressure; deferring");
      msg.nak(config.DROVER_PRESSURE_DEFER_MS);
      return;
    }
    if (isVerificationAssignment(assignment)) {
      await verify(msg, assignment);
      return;
    }
    const outcome = await withSpan(
      "task",
      { [Attr.taskId]: assignment.taskId, [Attr.runId]: assignment.runId },
      async (span) => {
        const result = await runAssignment(deps, assignment.taskId, {
          shutdown: shutdown.signal,
          working: () => msg.working(),
        });
        if (result.status !== "dropped") {
          span.setAttributes({
            [Attr.kind]: result.kind,
            [Attr.phase]: result.phase,
            [Attr.attempt]: result.attempt,
            "drover.outcome": result.status,
          });
          // Inside the span, so the line carries the task's trace id.
          logTaskEnded(logger, result);
        } else {
          span.setAttributes({ "drover.outcome": "dropped", "drover.reason": result.reason });
        }
        return result;
      },
      { parent: extractTraceContext(msg.headers ?? {}), kind: SpanKind.CONSUMER },
    );
    outcomes.push(outcome);
    taskOutcomes.inc({ outcome: outcome.status });
    if (outcome.status === "handed_back") msg.nak();
    else msg.ack();
    if (outcome.status === "dropped") return;
    if (REPORTED.has(outcome.status)) {
      // Best effort: the reaper finds the same facts if this never arrives.
      coordinator
        .taskFinished(
          {
            taskId: String(outcome.taskId),
            runId: outcome.runId,
            outcome: outcome.status,
            phase: outcome.phase,
          },
          { deadline: new Date(Date.now() + 5_000) },
        )
        .catch((err) => logger.debug({ err: String(err) }, "TaskFinished did not arrive"));
    }
  };

  /** A finished run checked against its source: here, because only workers open source credentials. */
  const verify = async (msg: JsMsg, assignment: VerificationAssignment) => {
    const outcome = await withSpan(
      "verification",
      { [Attr.runId]: assignment.verifyRunId },
      async (span) => {
        const result = await runVerification(deps, assignment.verifyRunId, {
          shutdown: shutdown.signal,
          working: () => msg.working(),
        });
        span.setAttributes({ "drover.outcome": result.status });
        return result;
      },
      { parent: extractTraceContext(msg.headers ?? {}), kind: SpanKind.CONSUMER },
    );
    verificationOutcomes.inc({ outcome: outcome.status });
    if (outcome.status === "handed_back") msg.nak();
    else msg.ack();
    if (outcome.status === "dropped") return;
    const log = { run_id: outcome.runId, outcome: outcome.status, attempt: outcome.attempt };
    if (outcome.status === "deferred") logger.warn({ ...log, error: outcome.error }, "verification deferred");
    else if (outcome.status === "verified")
      logger.info(
        { ...log, ok: outcome.ok, mismatches: outcome.mismatches, error: outcome.error },
        "run verified",
      );
    else logger.info(log, "verification ended");
  };

  const lane = await startLane(jetstream(nc), names, {
    width: config.DROVER_LANE_WIDTH,
    handle,
    ensure: () => ensureTaskQueue(jsm, names),
    onError: (err) => logger.error({ err }, "task handling failed; message will be redelivered"),
  });
  logger.info({ lane: config.DROVER_LANE_WIDTH, queue: names.stream }, "worker pulling");

  let stopped: Promise<void> | undefined;
  return {
    id: config.DROVER_WORKER_ID,
    get state() {
      return state;
    },
    outcomes,
    stop() {
      stopped ??= (async () => {
        state = "draining";
        logger.info({ running: lane.running }, "draining");
        shutdown.abort(new Error("worker shutting down"));
        const drained = lane.drain();
        const grace = new Promise<"timeout">((r) =>
          setTimeout(() => r("timeout"), config.DROVER_SHUTDOWN_GRACE_MS).unref(),
        );
        if ((await Promise.race([drained, grace])) === "timeout") {
          logger.warn({ running: lane.running }, "grace time over; leaving the rest to the reaper");
        }
        walls.unsubscribe();
        await budgets.flush();
        coordinator.close();
        await nc.drain().catch(() => {});
        await database.close();
        state = "stopped";
        logger.info("worker stopped");
      })();
      return stopped;
    },
  };
}

function logTaskEnded(logger: Logger, outcome: Exclude<AssignmentOutcome, { status: "dropped" }>): void {
  const log = {
    task_id: outcome.taskId,
    run_id: outcome.runId,
    kind: outcome.kind,
    outcome: outcome.status,
    ...outcome.summary,
  };
  if (outcome.status === "failed" || outcome.status === "released")
    logger.warn({ ...log, error: outcome.error }, "task ended");
  else logger.info(log, "task ended");
}
