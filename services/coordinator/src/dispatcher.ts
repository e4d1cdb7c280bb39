import type { Db } from "@drover/db";
import { markTasksDispatched, undispatchTasks } from "@drover/engine";
import { publishTask, type TaskQueueNames } from "@drover/task-queue";
import { Attr, extractTraceContext, injectTraceContext, SpanKind, withSpan } from "@drover/telemetry";
import type { JetStreamClient } from "@nats-io/jetstream";

export interface DispatcherDeps {
  db: Db;
  js: JetStreamClient;
  names: TaskQueueNames;
  /** Twice the lane width: enough queued that a worker finishing a task never waits on us. */
  maxInflight: number;
  /** Re-creates the stream when publishing fails (someone deleted it, the broker lost it). */
  ensureQueue(): Promise<void>;
}

/**
 * Tops a run up to maxInflight tasks in flight (running, or published and not yet claimed),
 * publishing the deficit — never one-in-one-out, which decays to a single running task.
 * Publishing twice is harmless (the claim is fenced); publishing too few stalls the run, so a task
 * whose publish fails is unmarked for the next top-up.
 */
export async function topUpRun(deps: DispatcherDeps, runId: string): Promise<number> {
  const picked = await markTasksDispatched(deps.db, runId, deps.maxInflight);
  if (picked.ids.length === 0) return 0;

  const parent = extractTraceContext(picked.traceContext ?? {});
  return withSpan(
    "dispatch",
    { [Attr.runId]: runId, "drover.dispatched": picked.ids.length },
    async () => {
      const headers = injectTraceContext();
      const failed: number[] = [];
      for (const taskId of picked.ids) {
        try {
          await publishTask(deps.js, deps.names, { taskId, runId }, headers);
        } catch {
          failed.push(taskId);
        }
      }
      if (failed.length > 0) {
        await deps.ensureQueue().catch(() => {});
        await undispatchTasks(deps.db, failed);
      }
      return picked.ids.length - failed.length;
    },
    { parent, kind: SpanKind.PRODUCER },
  );
}
