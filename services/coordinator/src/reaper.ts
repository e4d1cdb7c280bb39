import { type RunSummary, runs } from "@drover/db";
import { progressRun } from "@drover/engine";
import { eq, sql } from "drizzle-orm";
import type { CoordinatorContext } from "./context.js";
import { kindOutcomes } from "./run-outcomes.js";

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
 * commit together: a run is never left without both its tasks and its counts. The frozen counts are
 * the ones GetRun showed (kindOutcomes), which need the notes about to go.
 */
export async function pruneFinishedRuns(ctx: CoordinatorContext, batch = 20): Promise<number> {
  return ctx.db.transaction(async (tx) => {
    const due = await tx
      .select()
      .from(runs)
      .where(
        sql`${runs.id} in (select id from drover.runs
                       where status in ('succeeded', 'failed', 'stopped') and summary is null
                         and finished_at < now() - make_interval(days => ${ctx.config.DROVER_RETENTION_DAYS})
                       order by finished_at limit ${batch} for update skip locked)`,
      );
    if (due.length === 0) return 0;
    for (const run of due) {
      const outcomes = await kindOutcomes(tx, run);
      const kindTasks = await tx.execute<{ kind: string; total: string; done: string }>(sql`
        select kind, count(*) as total,
               count(*) filter (where status in ('succeeded', 'failed', 'cancelled')) as done
          from drover.tasks where run_id = ${run.id}::uuid group by kind`);
      const byStatus = await tx.execute<{ status: string; n: string }>(sql`
        select status, count(*) as n from drover.tasks where run_id = ${run.id}::uuid group by status`);
      const tasksOf = new Map(kindTasks.map((t) => [t.kind, t]));
      const summary: RunSummary = {
        kinds: Object.fromEntries(
          [...new Set([...outcomes.keys(), ...tasksOf.keys()])].map((kind) => {
            const o = outcomes.get(kind);
            return [
              kind,
              {
                created: Number(o?.created ?? 0),
                matched: Number(o?.matched ?? 0),
                already_here: Number(o?.alreadyHere ?? 0),
                skipped: Number(o?.skipped ?? 0),
                failed: Number(o?.failed ?? 0),
                tasks_total: Number(tasksOf.get(kind)?.total ?? 0),
                tasks_done: Number(tasksOf.get(kind)?.done ?? 0),
              },
            ];
          }),
        ),
        tasks: Object.fromEntries(byStatus.map((t) => [t.status, Number(t.n)])),
      };
      await tx.update(runs).set({ summary, updatedAt: new Date() }).where(eq(runs.id, run.id));
    }
    const ids = due.map((r) => r.id);
    await tx.execute(sql`delete from drover.tasks where run_id = any(${sql.param(ids)}::uuid[])`);
    await tx.execute(sql`delete from drover.notes where run_id = any(${sql.param(ids)}::uuid[])`);
    return due.length;
  });
}
