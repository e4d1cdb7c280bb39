import type { Queryable } from "@drover/db";
import type { TaskFinishedRequest } from "@drover/proto";
import type { Logger } from "@drover/telemetry";
import { metrics } from "@drover/telemetry";
import { sql } from "drizzle-orm";
import { NotFound } from "./domain-errors.js";
import { quoted } from "./quote.js";
import { invalid, requireRunId } from "./validation.js";

/** The outcomes a worker reports (worker_service.proto): the ends of an attempt that free a slot. */
const REPORTED_OUTCOMES = ["succeeded", "failed", "cancelled", "released"] as const;
type ReportedOutcome = (typeof REPORTED_OUTCOMES)[number];
/** The task status each outcome leaves behind. */
const STATUS_AFTER: Record<ReportedOutcome, string> = {
  succeeded: "succeeded",
  failed: "failed",
  cancelled: "cancelled",
  released: "pending",
};

const reports = metrics.counter(
  "drover_task_reports_total",
  "TaskFinished reports from workers by outcome; stale ones (the task moved on since) are counted too",
  ["outcome", "stale"],
);

export interface TaskReport {
  taskId: number;
  runId: string;
  outcome: ReportedOutcome;
  phase: number;
}

/**
 * Checks a TaskFinished against the database before the run is advanced on its word: the task must
 * be the named run's, in the named phase (one statement, fenced on task, run and phase together),
 * so a confused or forged report is refused rather than advancing an unrelated run. A report the
 * row no longer agrees with (the task was retried or resumed since) is stale, not wrong: the row
 * wins, the report is counted as stale, and the run is advanced all the same.
 */
export async function checkTaskReport(
  q: Queryable,
  req: TaskFinishedRequest,
  logger: Logger,
): Promise<TaskReport> {
  const runId = requireRunId(req.runId);
  if (!/^[1-9]\d{0,17}$/.test(req.taskId))
    throw invalid(`task_id must be a positive whole number, got ${quoted(req.taskId)}`);
  const taskId = Number(req.taskId);
  const outcome = REPORTED_OUTCOMES.find((o) => o === req.outcome);
  if (!outcome)
    throw invalid(`outcome must be one of ${REPORTED_OUTCOMES.join(", ")}, got ${quoted(req.outcome)}`);
  const [task] = await q.execute<{ status: string; phase: number }>(sql`
    select status, phase from drover.tasks where id = ${taskId} and run_id = ${runId}::uuid`);
  if (!task) throw new NotFound(`task ${taskId} is not a task of run ${runId}`, "TASK_NOT_FOUND");
  if (task.phase !== req.phase)
    throw invalid(`task ${taskId} of run ${runId} is in phase ${task.phase}, not ${req.phase}`);
  const stale = task.status !== STATUS_AFTER[outcome];
  reports.inc({ outcome, stale: String(stale) });
  logger.debug(
    { task_id: taskId, run_id: runId, phase: req.phase, outcome, status: task.status },
    stale ? "a task reported finished has moved on since" : "task reported finished",
  );
  return { taskId, runId, outcome, phase: req.phase };
}
