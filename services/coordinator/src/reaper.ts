import { ENDED_TASK_STATUSES, type Queryable, type RunRow, type RunSummary } from "@drover/db";
import {
  pruneFinishedRuns,
  redispatchLostTasks,
  releaseStaleTasks,
  releaseTasksOfDeadWorkers,
} from "@drover/engine";
import { sql } from "drizzle-orm";
import { pruneAuditEvents } from "./audit-trail.js";
import type { CoordinatorContext } from "./context.js";
import { advanceRun } from "./run-advance.js";
import { kindOutcomes, type Sources } from "./run-outcomes.js";

export interface ReaperReport {
  released: number;
  failed: number;
  /** Workers whose liveness record expired this pass (DROVER_WORKER_ID), their tasks released. */
  deadWorkers: string[];
  redispatched: number;
  runsProgressed: number;
  pruned: number;
  /** Audit events older than the retention period, removed this pass. */
  auditPruned: number;
}

/**
 * One pass of the leader's reaper. Postgres is the source of truth and the broker only a doorbell,
 * so each pass repairs whatever a crash, a lost message or a lost RPC left behind:
 * - running tasks of a dead worker (its liveness record expired: within seconds of a SIGKILL) go
 *   back to pending, or fail once they have used their attempts; the same for running tasks whose
 *   lock went stale (a worker without a record, or an attempt that stopped touching its lock);
 * - tasks published long ago and still pending were lost by the broker: unmark them for re-publishing;
 * - every live run is advanced (barrier, finalize, stop settling), then the pool's slots are
 *   dealt out again among them (dispatcher.ts);
 * - finished runs older than the retention period lose their tasks and notes, their counts frozen
 *   first; audit events older than the same period go too (audit-trail.ts).
 * Every statement is the engine's (task-transitions, run-transitions).
 */
export async function reaperPass(ctx: CoordinatorContext): Promise<ReaperReport> {
  const { db, config } = ctx;
  const dead = await releaseTasksOfDeadWorkers(db, { maxAttempts: config.DROVER_MAX_ATTEMPTS });
  const stale = await releaseStaleTasks(db, {
    staleMs: config.DROVER_STALE_TASK_MS,
    maxAttempts: config.DROVER_MAX_ATTEMPTS,
  });
  const redispatched = await redispatchLostTasks(db, config.DROVER_REDISPATCH_AFTER_MS);
  const live = await db.execute<{ id: string }>(
    sql`select id from drover.runs where status in ('running', 'stopping')`,
  );
  for (const run of live) {
    try {
      await advanceRun(ctx, run.id, { dispatch: false });
    } catch (err) {
      ctx.logger.error({ err, run_id: run.id }, "the reaper could not advance a run");
    }
  }
  await ctx.dispatch();
  const pruned = await pruneRunsPastRetention(ctx);
  const auditPruned = await pruneAuditEvents(db, { retentionDays: config.DROVER_RETENTION_DAYS });
  return {
    released: dead.released + stale.released,
    failed: dead.failed + stale.failed,
    deadWorkers: dead.deadWorkers,
    redispatched,
    runsProgressed: live.length,
    pruned,
    auditPruned,
  };
}

/** Finished runs past DROVER_RETENTION_DAYS lose their tasks and notes, their counts frozen first. */
export function pruneRunsPastRetention(ctx: CoordinatorContext): Promise<number> {
  return pruneFinishedRuns(ctx.db, {
    retentionDays: ctx.config.DROVER_RETENTION_DAYS,
    summarize: (q, run) => frozenCounts(q, ctx.providers, run),
  });
}

/**
 * What a pruned run keeps of its tasks and notes: the counts GetRun showed (kindOutcomes, which
 * needs the notes about to go) and its tasks by kind and status.
 */
async function frozenCounts(q: Queryable, sources: Sources, run: RunRow): Promise<RunSummary> {
  const outcomes = await kindOutcomes(q, sources, run);
  const kindTasks = await q.execute<{ kind: string; total: string; done: string }>(sql`
    select kind, count(*) as total,
           count(*) filter (where status = any(${sql.param([...ENDED_TASK_STATUSES])}::text[])) as done
      from drover.tasks where run_id = ${run.id}::uuid group by kind`);
  const byStatus = await q.execute<{ status: string; n: string }>(sql`
    select status, count(*) as n from drover.tasks where run_id = ${run.id}::uuid group by status`);
  const tasksOf = new Map(kindTasks.map((t) => [t.kind, t]));
  return {
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
}
