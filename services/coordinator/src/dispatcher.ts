import type { Db } from "@drover/db";
import { publishTask, type TaskQueueNames } from "@drover/task-queue";
import { Attr, extractTraceContext, injectTraceContext, SpanKind, withSpan } from "@drover/telemetry";
import type { JetStreamClient } from "@nats-io/jetstream";
import { sql } from "drizzle-orm";

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
  // Marks the deficit as dispatched in one statement. SKIP LOCKED lets two coordinators top up the
  // same run at once without publishing the same task twice.
  const picked = await deps.db.execute<{ id: string; trace_context: Record<string, string> | null }>(sql`
    with run as (
      select r.id, r.current_phase, r.trace_context from drover.runs r where r.id = ${runId}::uuid and r.status = 'running'
    ), inflight as (
      select count(*)::int as n from drover.tasks t
       where t.run_id = ${runId}::uuid and (t.status = 'running' or (t.status = 'pending' and t.dispatched_at is not null))
    ), due as (
      select t.id from drover.tasks t, run
       where t.run_id = run.id and t.phase = run.current_phase and t.status = 'pending'
         and t.dispatched_at is null and t.available_at <= now()
       order by t.id
       limit greatest(${deps.maxInflight} - (select n from inflight), 0)
       for update of t skip locked
    )
    update drover.tasks t set dispatched_at = now()
      from due, run
     where t.id = due.id
    returning t.id, run.trace_context`);
  if (picked.length === 0) return 0;

  const parent = extractTraceContext(picked[0]!.trace_context ?? {});
  return withSpan(
    "dispatch",
    { [Attr.runId]: runId, "drover.dispatched": picked.length },
    async () => {
      const headers = injectTraceContext();
      const failed: number[] = [];
      for (const row of picked) {
        try {
          await publishTask(deps.js, deps.names, { taskId: Number(row.id), runId }, headers);
        } catch {
          failed.push(Number(row.id));
        }
      }
      if (failed.length > 0) {
        await deps.ensureQueue().catch(() => {});
        await deps.db.execute(sql`
          update drover.tasks set dispatched_at = null
           where id = any(${sql.param(failed)}::bigint[]) and status = 'pending'`);
      }
      return picked.length - failed.length;
    },
    { parent, kind: SpanKind.PRODUCER },
  );
}
