import type { JetStreamClient } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { type TaskQueueNames, taskSubject } from "./names.js";

export interface TaskAssignment {
  taskId: number;
  runId: string;
}

/** A finished run to check against its source: run by a worker, where the source credential may be opened. */
export interface VerificationAssignment {
  verifyRunId: string;
}

export type Assignment = TaskAssignment | VerificationAssignment;

export function isVerificationAssignment(a: Assignment): a is VerificationAssignment {
  return "verifyRunId" in a;
}

/**
 * Publishes one assignment. Publishing a task twice is harmless (the claim is fenced in Postgres);
 * publishing too few stalls a run, so callers publish after their transaction commits.
 */
export async function publishTask(
  js: JetStreamClient,
  names: TaskQueueNames,
  assignment: TaskAssignment,
  traceHeaders: Record<string, string> = {},
): Promise<void> {
  const h = headers();
  for (const [k, v] of Object.entries(traceHeaders)) h.set(k, v);
  await js.publish(taskSubject(names, assignment.runId), JSON.stringify(assignment), { headers: h });
}

/**
 * Publishes a verification request. Like a task, publishing it twice is harmless: the worker's
 * claim on drover.verification_requests is fenced.
 */
export async function publishVerification(
  js: JetStreamClient,
  names: TaskQueueNames,
  runId: string,
  traceHeaders: Record<string, string> = {},
): Promise<void> {
  const h = headers();
  for (const [k, v] of Object.entries(traceHeaders)) h.set(k, v);
  const assignment: VerificationAssignment = { verifyRunId: runId };
  await js.publish(taskSubject(names, runId), JSON.stringify(assignment), { headers: h });
}

export function parseAssignment(data: Uint8Array): Assignment | undefined {
  try {
    const value = JSON.parse(new TextDecoder().decode(data)) as Partial<
      TaskAssignment & VerificationAssignment
    >;
    if (typeof value.taskId === "number" && typeof value.runId === "string") {
      return { taskId: value.taskId, runId: value.runId };
    }
    if (typeof value.verifyRunId === "string" && UUID.test(value.verifyRunId)) {
      return { verifyRunId: value.verifyRunId };
    }
  } catch {
    // fall through: a garbled assignment is terminated by the caller
  }
  return undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
