import {
  type AssignmentOutcome,
  type HandedOn,
  runAssignment,
  runVerification,
  type TaskRunnerDeps,
  type VerificationOutcome,
} from "@drover/engine";
import {
  isVerificationAssignment,
  parseAssignment,
  type TaskAssignment,
  type VerificationAssignment,
} from "@drover/task-queue";
import {
  Attr,
  extractTraceContext,
  type HeaderGetter,
  type Logger,
  metrics,
  SpanKind,
  withSpan,
} from "@drover/telemetry";
import type { HeldTasks } from "./held-tasks.js";

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

/** The part of a JetStream message the handler uses: its payload, trace headers and the retry verbs. */
export interface TaskMessage {
  readonly data: Uint8Array;
  readonly headers?: HeaderGetter;
  ack(): void;
  nak(delayMs?: number): void;
  term(reason?: string): void;
  working(): void;
}

/** A task that ended so that its run may move on, as the coordinator hears of it. */
export interface FinishedTask {
  taskId: number;
  runId: string;
  outcome: "succeeded" | "failed" | "cancelled";
  phase: number;
}

export interface TaskMessageDeps {
  runner: TaskRunnerDeps;
  /** The destination database's pressure, read before a claim. */
  pressure: { underPressure(): Promise<boolean>; readonly lastValue: number | undefined };
  /** How long a message deferred for pressure waits before it is offered again. */
  pressureDeferMs: number;
  /** Aborted when the worker shuts down: running attempts hand themselves back. */
  shutdown: AbortSignal;
  held: HeldTasks;
  /**
   * A task's attempt ended and freed its lane slot: publish its run's next due tasks, up to the
   * run's fair share, before the slot is free for the lane to pull again (handOnSlot). `marked`:
   * the tasks a succeeded task's finish already marked published in its own commit
   * (TaskRunnerDeps.handOnAtFinish), which are only to be published.
   */
  handOnSlot?(runId: string, marked?: HandedOn): Promise<void>;
  /** Tells the coordinator a task finished (best effort: the reaper finds the same facts). */
  reportFinished(task: FinishedTask): Promise<unknown>;
  logger: Logger;
  /** Every task's outcome, once it is settled with the broker (tests watch the worker through it). */
  onOutcome?(outcome: AssignmentOutcome): void;
}

/**
 * How the broker hears of an attempt's end. The database decides what happens next; the message
 * only says whether this delivery is done with:
 * - handed back (shutdown): nak, so another worker gets it at once;
 * - everything else is acked: a finished task is done, and a released, parked or lost one is
 *   pending again with dispatched_at cleared, so the dispatcher publishes it when it is due
 *   (a nak would deliver it early, and twice);
 * - a message that is not an assignment is terminated: no redelivery can make it one.
 */
export type MessageVerb =
  | { verb: "ack" }
  | { verb: "nak"; delayMs?: number }
  | { verb: "term"; reason: string };

export function verbForOutcome(outcome: AssignmentOutcome | VerificationOutcome): MessageVerb {
  return outcome.status === "handed_back" ? { verb: "nak" } : { verb: "ack" };
}

/** Outcomes after which the run may move on: the coordinator hears of them at once. */
const REPORTED = new Set(["succeeded", "failed", "cancelled"]);

/**
 * The worker's handling of one assignment message: defer under database pressure, run the task
 * (or verification), settle the message by the outcome, and report a finished task.
 */
export function taskMessageHandler(deps: TaskMessageDeps): (msg: TaskMessage) => Promise<void> {
  const { logger } = deps;
  return async (msg) => {
    const assignment = parseAssignment(msg.data);
    if (!assignment) {
      settle(msg, { verb: "term", reason: "not a task assignment" });
      return;
    }
    if (await deps.pressure.underPressure()) {
      // Before the claim, so nothing is held: the message comes back after the delay.
      deferrals.inc({});
      logger.info({ assignment, pressure: deps.pressure.lastValue }, "database under pressure; deferring");
      settle(msg, { verb: "nak", delayMs: deps.pressureDeferMs });
      return;
    }
    if (isVerificationAssignment(assignment)) await verify(deps, msg, assignment);
    else await runTask(deps, msg, assignment);
  };
}

async function runTask(deps: TaskMessageDeps, msg: TaskMessage, assignment: TaskAssignment): Promise<void> {
  const { logger } = deps;
  const outcome = await withSpan(
    "task",
    { [Attr.taskId]: assignment.taskId, [Attr.runId]: assignment.runId },
    async (span) => {
      const result = await runAssignment(deps.runner, assignment.taskId, {
        shutdown: deps.shutdown,
        working: () => msg.working(),
        onClaim: deps.held.tracker(msg),
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
  taskOutcomes.inc({ outcome: outcome.status });
  settle(msg, verbForOutcome(outcome));
  deps.onOutcome?.(outcome);
  if (outcome.status === "dropped") return;
  // Handed back on shutdown, the task's message comes back itself (nak): nothing to hand on.
  if (outcome.status !== "handed_back" && deps.handOnSlot)
    await deps
      .handOnSlot(outcome.runId, outcome.handedOn)
      .catch((err) =>
        logger.warn({ err: String(err) }, "handing the slot on failed; the next round fills it"),
      );
  if (!REPORTED.has(outcome.status)) return;
  deps
    .reportFinished({
      taskId: outcome.taskId,
      runId: outcome.runId,
      outcome: outcome.status as FinishedTask["outcome"],
      phase: outcome.phase,
    })
    .catch((err) => logger.debug({ err: String(err) }, "TaskFinished did not arrive"));
}

/** A finished run checked against its source: here, because only workers open source credentials. */
async function verify(deps: TaskMessageDeps, msg: TaskMessage, assignment: VerificationAssignment) {
  const { logger } = deps;
  const outcome = await withSpan(
    "verification",
    { [Attr.runId]: assignment.verifyRunId },
    async (span) => {
      const result = await runVerification(deps.runner, assignment.verifyRunId, {
        shutdown: deps.shutdown,
        working: () => msg.working(),
      });
      span.setAttributes({ "drover.outcome": result.status });
      return result;
    },
    { parent: extractTraceContext(msg.headers ?? {}), kind: SpanKind.CONSUMER },
  );
  verificationOutcomes.inc({ outcome: outcome.status });
  settle(msg, verbForOutcome(outcome));
  if (outcome.status === "dropped") return;
  const log = { run_id: outcome.runId, outcome: outcome.status, attempt: outcome.attempt };
  if (outcome.status === "deferred") logger.warn({ ...log, error: outcome.error }, "verification deferred");
  else if (outcome.status === "parked")
    logger.info({ ...log, error: outcome.error }, "verification parked until the source's budget resets");
  else if (outcome.status === "verified")
    logger.info(
      { ...log, ok: outcome.ok, mismatches: outcome.mismatches, error: outcome.error },
      "run verified",
    );
  else logger.info(log, "verification ended");
}

function settle(msg: TaskMessage, verb: MessageVerb): void {
  try {
    if (verb.verb === "ack") msg.ack();
    else if (verb.verb === "nak") msg.nak(verb.delayMs);
    else msg.term(verb.reason);
  } catch {
    // The connection closed under an attempt that outlived the grace time: the worker handed the
    // task back already, and the broker redelivers what it never heard of.
  }
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
