import { progressRun } from "@drover/engine";
import { sql } from "drizzle-orm";
import type { CoordinatorContext } from "./context.js";

export interface ReaperReport {
  released: number;
  failed: number;
  redispatched: number;
  runsProgressed: number;
  pruned: number;
}

/**
 * The leader's sweep. Postgres is the source of truth and the broker only a doorbell, so each pass
 * repairs whatever a crash, a lost message or a lost RPC left behind:
 * - running tasks whose lock went stale (their worker died) go back to pending, or fail once they
 *   have used their attempts — a task that kills its worker every time must not loop forever;
 * - tasks published long ago and still pending were lost by the broker: unmark them for re-publishing;
 * - every live run is moved on (barrier, finalize, stop settling) and topped up;
 * - finished runs older than the retention period lose their tasks and notes, their counts frozen first.
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
  const pruned = await pruneFinishedRuns(ctx);
  return {
    pruned,
    released: stale.filter((t) => t.status === "pending").length,
    failed: stale.filter((t) => t.status === "failed").length,
    redispatched: redispatched.length,
    runsProgressed: live.length,
  };
}

/**
 * Freezes the counts of finished runs past retention into runs.summary, then deletes their tasks
 * and notes, a few runs per pass so a backlog never holds long locks. The summary and the deletes
 * commit together: a run is never left without both its tasks and its counts.
 */
export async function pruneFinishedRuns(ctx: CoordinatorContext, batch = 20): Promise<number> {
  return ctx.db.transaction(async (tx) => {
    const runs = await tx.execute<{ id: string }>(sql`
      update drover.runs r
         set summary = jsonb_build_object(
               'kinds', coalesce((select jsonb_object_agg(k.kind, k.counts) from (
                   select t.kind, jsonb_build_object(
                            'created', coalesce(sum((t.stats ->> 'created')::bigint), 0),
                            'matched', coalesce(sum((t.stats ->> 'matched')::bigint), 0),
                            'already_here', coalesce(sum((t.stats ->> 'already_here')::bigint), 0),
                            'skipped', coalesce(sum((t.stats ->> 'skipped')::bigint), 0),
                            'failed', coalesce(sum((t.stats ->> 'failed')::bigint), 0),
                            'tasks_total', count(*),
                            'tasks_done', count(*) filter (where t.status in ('succeeded', 'failed', 'cancelled'))) as counts
                     from drover.tasks t where t.run_id = r.id group by t.kind) k), '{}'::jsonb),
               'tasks', coalesce((select jsonb_object_agg(s.status, s.n) from (
                   select t.status, count(*) as n from drover.tasks t where t.run_id = r.id group by t.status) s), '{}'::jsonb)),
             updated_at = now()
       where r.id in (select id from drover.runs
                       where status in ('succeeded', 'failed', 'stopped') and summary is null
                         and finished_at < now() - make_interval(days => ${ctx.config.DROVER_RETENTION_DAYS})
                       order by finished_at limit ${batch} for update skip locked)
      returning r.id`);
    if (runs.length === 0) return 0;
    const ids = runs.map((r) => r.id);
    await tx.execute(sql`delete from drover.tasks where run_id = any(${sql.param(ids)}::uuid[])`);
    await tx.execute(sql`delete from drover.notes where run_id = any(${sql.param(ids)}::uuid[])`);
    return runs.length;
  });
}
