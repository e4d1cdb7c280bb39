import { progressRun } from "@drover/engine";
import { sql } from "drizzle-orm";
import type { CoordinatorContext } from "./context.js";

export interface ReaperReport {
  released: number;
  failed: number;
  redispatched: number;
  runsProgressed: number;
}

/**
 * The leader's sweep. Postgres is the source of truth and the broker only a doorbell, so each pass
 * repairs whatever a crash, a lost message or a lost RPC left behind:
 * - running tasks whose lock went stale (their worker died) go back to pending, or fail once they
 *   have used their attempts — a task that kills its worker every time must not loop forever;
 * - tasks published long ago and still pending were lost by the broker: unmark them for re-publishing;
 * - every live run is moved on (barrier, finalize, stop settling) and topped up.
 */
export async function sweep(ctx: CoordinatorContext): Promise<ReaperReport> {
  const { db, config } = ctx;
  const stale = await db.execute<{ id: string; status: string }>(sql`
    update drover.tasks
       set status = case when attempts >= ${config.DROVER_MAX_ATTEMPTS} then 'failed' else 'pending' end,
           last_error = case when attempts >= ${config.DROVER_MAX_ATTEMPTS}
                             then 'its worker stopped responding on every attempt' else 'its worker stopped responding' end,
           finished_at = case when attempts >= ${config.DROVER_MAX_ATTEMPTS} then now() end,
           locked_by = null, locked_at = null, dispatched_at = null, available_at = now(), updated_at = now()
     where status = 'running' and locked_at < now() - make_interval(secs => ${config.DROVER_STALE_TASK_MS / 1000})
    returning id, status`);
  const redispatched = await db.execute(sql`
    update drover.tasks set dispatched_at = null
     where status = 'pending' and dispatched_at < now() - make_interval(secs => ${config.DROVER_REDISPATCH_AFTER_MS / 1000})
    returning id`);
  const live = await db.execute<{ id: string }>(
    sql`select id from drover.runs where status in ('running', 'stopping')`,
  );
  for (const run of live) {
    try {
      await progressRun({ db, providers: ctx.providers, notesCap: config.DROVER_NOTES_CAP }, run.id);
      await ctx.topUp(run.id);
    } catch (err) {
      ctx.logger.error({ err, run_id: run.id }, "sweeping a run failed");
    }
  }
  return {
    released: stale.filter((t) => t.status === "pending").length,
    failed: stale.filter((t) => t.status === "failed").length,
    redispatched: redispatched.length,
    runsProgressed: live.length,
  };
}
