import type { Queryable, RunRow, RunSummary } from "@drover/db";
import {
  pruneFinishedRuns,
  redispatchLostTasks,
  releaseStaleTasks,
  releaseTasksOfDeadWorkers,
  removeClosedLedgers,
  runsToAdvance,
  taskCountsByKind,
  taskCountsByStatus,
} from "@drover/engine";
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
  /** Ledger rows of closed migrations past their grace, removed this pass. */
  ledgerRemoved: number;
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
 *   first; audit events older than the same period go too (audit-trail.ts);
 * - closed migrations past their grace lose their ledger, a few batches a pass (migration-closures.ts).
 * Every statement is the engine's (task-transitions, run-transitions).
 */
export async function reaperPass(ctx: CoordinatorContext): Promise<ReaperReport> {
  const { db, config } = ctx;
  const dead = await releaseTasksOfDeadWorkers(db, { maxAttempts: config.maxAttempts });
  const stale = await releaseStaleTasks(db, {
    staleMs: config.staleTaskMs,
    maxAttempts: config.maxAttempts,
  });
  const redispatched = await redispatchLostTasks(db, config.redispatchAfterMs);
  const live = await runsToAdvance(db);
  for (const runId of live) {
    try {
      await advanceRun(ctx, runId, { dispatch: false });
    } catch (err) {
      ctx.logger.error({ err, run_id: runId }, "the reaper could not advance a run");
    }
  }
  await ctx.dispatch();
  const pruned = await pruneRunsPastRetention(ctx);
  const auditPruned = await pruneAuditEvents(db, { retentionDays: config.retentionDays });
  const ledgerRemoved = await removeClosedLedgers(db);
  return {
    released: dead.released + stale.released,
    failed: dead.failed + stale.failed,
    deadWorkers: dead.deadWorkers,
    redispatched,
    runsProgressed: live.length,
    pruned,
    auditPruned,
    ledgerRemoved,
  };
}

/** Finished runs past DROVER_RETENTION_DAYS lose their tasks and notes, their counts frozen first. */
export function pruneRunsPastRetention(ctx: CoordinatorContext): Promise<number> {
  return pruneFinishedRuns(ctx.db, {
    retentionDays: ctx.config.retentionDays,
    summarize: (q, run) => frozenCounts(q, ctx.providers, run),
  });
}

/**
 * What a pruned run keeps of its tasks and notes: the counts GetRun showed (kindOutcomes, which
 * needs the notes about to go) and its tasks by kind and status.
 */
async function frozenCounts(q: Queryable, sources: Sources, run: RunRow): Promise<RunSummary> {
  const outcomes = await kindOutcomes(q, sources, run);
  const tasksOf = await taskCountsByKind(q, run.id);
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
            tasks_total: tasksOf.get(kind)?.total ?? 0,
            tasks_done: tasksOf.get(kind)?.done ?? 0,
          },
        ];
      }),
    ),
    tasks: await taskCountsByStatus(q, run.id),
  };
}
