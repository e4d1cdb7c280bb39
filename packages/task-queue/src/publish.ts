import type { JetStreamClient } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { type TaskQueueNames, taskSubject } from "./names.js";

export interface TaskAssignment {
  taskId: number;
  runId: string;
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

export function parseAssignment(data: Uint8Array): TaskAssignment | undefined {
  try {
    const value = JSON.parse(new TextDecoder().decode(data)) as Partial<TaskAssignment>;
    if (typeof value.taskId === "number" && typeof value.runId === "string") {
      return { taskId: value.taskId, runId: value.runId };
    }
  } catch {
    // fall through: a garbled assignment is terminated by the caller
  }
  return undefined;
}
