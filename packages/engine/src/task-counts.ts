import {
  ENDED_TASK_STATUSES,
  OPEN_TASK_STATUSES,
  type Queryable,
  type TaskStatus,
  taskStatus,
  taskStatusIn,
} from "@drover/db";
import type { TaskTally } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";

/**
 * How a run's tasks stand, the reads the API, the reaper's pruning, `explain` and a source's work
 * estimate share: one definition of "done" (ENDED_TASK_STATUSES), of what keeps a kind from having
 * been read, and of the tasks an estimate counts.
 */

/** A run's tasks by status; statuses it has none of are absent. */
export async function taskCountsByStatus(
  q: Queryable,
  runId: string,
): Promise<Partial<Record<TaskStatus, number>>> {
  const rows = await q.execute<{ status: TaskStatus; n: string }>(sql`
    select status, count(*) as n from drover.tasks where run_id = ${runId}::uuid group by status`);
  return Object.fromEntries(rows.map((t) => [t.status, Number(t.n)]));
}

export interface KindTaskCounts {
  total: number;
  /** Attempts over: succeeded, failed or cancelled. */
  done: number;
  running: number;
}

/** A run's tasks per kind; kinds it seeded no task of are absent. */
export async function taskCountsByKind(q: Queryable, runId: string): Promise<Map<string, KindTaskCounts>> {
  const rows = await q.execute<{ kind: string; total: string; done: string; running: string }>(sql`
    select kind, count(*) as total,
           count(*) filter (where status in ${taskStatusIn(ENDED_TASK_STATUSES)}) as done,
           count(*) filter (where status = ${taskStatus.running}) as running
      from drover.tasks where run_id = ${runId}::uuid group by kind`);
  return new Map(
    rows.map((t) => [t.kind, { total: Number(t.total), done: Number(t.done), running: Number(t.running) }]),
  );
}

/**
 * Why the run may not have read every row of a kind, from its tasks of the kind: one that failed
 * (its error), else one that was cancelled, else one still pending or running; with how many tasks
 * of the kind share that status. Undefined when every task of the kind succeeded (or it has none).
 */
export async function unfinishedKindTasks(
  q: Queryable,
  runId: string,
  kind: string,
): Promise<{ status: TaskStatus; n: number; lastError: string | null } | undefined> {
  const [task] = await q.execute<{ status: TaskStatus; n: string; last_error: string | null }>(sql`
    select status, count(*) over (partition by status) as n, last_error from drover.tasks
     where run_id = ${runId}::uuid and kind = ${kind}
       and status in ${taskStatusIn(["failed", "cancelled", "pending", "running"])}
     order by case status when ${taskStatus.failed} then 0 when ${taskStatus.cancelled} then 1 else 2 end limit 1`);
  return task ? { status: task.status, n: Number(task.n), lastError: task.last_error } : undefined;
}

/** The run's tasks still to run, running or succeeded, per kind, status and cursor (TaskTally). */
export async function taskTallies(q: Queryable, runId: string): Promise<TaskTally[]> {
  return q.execute<TaskTally & Record<string, unknown>>(sql`
    select kind, status, cursor, count(*)::int as n from drover.tasks
     where run_id = ${runId}::uuid and status in ${taskStatusIn([...OPEN_TASK_STATUSES, "succeeded"])}
     group by kind, status, cursor`);
}
