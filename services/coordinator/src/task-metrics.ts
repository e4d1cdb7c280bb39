import { type Db, LIVE_RUN_STATUSES, RUN_STATUSES, TASK_STATUSES } from "@drover/db";
import { metrics } from "@drover/telemetry";
import { sql } from "drizzle-orm";

const tasksByStatus = metrics.gauge(
  "drover_tasks",
  "Tasks of live runs (pending, running or stopping) by status, read from the database at each scrape",
  ["status"],
);
const runsByStatus = metrics.gauge("drover_runs", "Runs by status, read from the database at each scrape", [
  "status",
]);

/**
 * Keeps the task and run gauges current from Postgres, the source of truth, at each scrape rather
 * than on a timer: every coordinator replica answers the same, and an unscraped one costs nothing.
 * Only live runs' tasks are counted: finished runs keep theirs until retention prunes them, and
 * they are not work anyone needs to watch.
 * Returns the function that stops the refreshing.
 */
export function refreshTaskMetrics(db: Db): () => void {
  return metrics.onRefresh(async () => {
    const [tasks, runs] = await Promise.all([
      db.execute<{ status: string; n: string }>(sql`
        select t.status, count(*) as n from drover.tasks t
          join drover.runs r on r.id = t.run_id
         where r.status = any(${sql.param([...LIVE_RUN_STATUSES])}::text[])
         group by t.status`),
      db.execute<{ status: string; n: string }>(sql`
        select status, count(*) as n from drover.runs group by status`),
    ]);
    const taskCounts = new Map(tasks.map((t) => [t.status, Number(t.n)]));
    for (const status of TASK_STATUSES) tasksByStatus.set({ status }, taskCounts.get(status) ?? 0);
    const runCounts = new Map(runs.map((r) => [r.status, Number(r.n)]));
    for (const status of RUN_STATUSES) runsByStatus.set({ status }, runCounts.get(status) ?? 0);
  });
}
