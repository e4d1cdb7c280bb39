import { budgets, type Queryable, type RunRow, runs } from "@drover/db";
import { create, type Run, RunSchema, RunStatus, timestampFromDate } from "@drover/proto";
import { and, eq, sql } from "drizzle-orm";
import { storedVerification } from "./verification.js";

const STATUS: Record<RunRow["status"], RunStatus> = {
  pending: RunStatus.PENDING,
  running: RunStatus.RUNNING,
  stopping: RunStatus.STOPPING,
  stopped: RunStatus.STOPPED,
  succeeded: RunStatus.SUCCEEDED,
  failed: RunStatus.FAILED,
};

export const TERMINAL_STATUSES: readonly RunRow["status"][] = ["stopped", "succeeded", "failed"];

export function toProtoStatus(status: RunRow["status"]): RunStatus {
  return STATUS[status];
}

export function fromProtoStatus(status: RunStatus): RunRow["status"] | undefined {
  return (Object.keys(STATUS) as RunRow["status"][]).find((k) => STATUS[k] === status);
}

/**
 * A run as the API shows it. Counts come from the tasks' stats, which each window updates in the
 * transaction that commits its rows: what is shown was committed, once.
 */
export async function runView(q: Queryable, run: RunRow): Promise<Run> {
  const [progress, taskCounts, kindTasks, [budget], facts] = await Promise.all([
    q.execute<{
      kind: string;
      created: string;
      matched: string;
      already_here: string;
      skipped: string;
      failed: string;
    }>(sql`
      select kind,
             coalesce(sum((stats ->> 'created')::bigint), 0) as created,
             coalesce(sum((stats ->> 'matched')::bigint), 0) as matched,
             coalesce(sum((stats ->> 'already_here')::bigint), 0) as already_here,
             coalesce(sum((stats ->> 'skipped')::bigint), 0) as skipped,
             coalesce(sum((stats ->> 'failed')::bigint), 0) as failed
        from drover.tasks where run_id = ${run.id}::uuid group by kind`),
    q.execute<{ status: string; n: string }>(sql`
      select status, count(*) as n from drover.tasks where run_id = ${run.id}::uuid group by status`),
    q.execute<{ kind: string; total: string; done: string; running: string }>(sql`
      select kind, count(*) as total,
             count(*) filter (where status in ('succeeded', 'failed', 'cancelled')) as done,
             count(*) filter (where status = 'running') as running
        from drover.tasks where run_id = ${run.id}::uuid group by kind`),
    q
      .select()
      .from(budgets)
      .where(and(eq(budgets.source, run.source), eq(budgets.sourceAccount, run.sourceAccount))),
    q.execute<{ key: string; value: string }>(sql`
      select key, value::text as value from drover.run_facts where run_id = ${run.id}::uuid order by key`),
  ]);
  // A pruned run's per-kind task counts were frozen with its row counts (none before they were).
  const tasksOf = new Map<
    string,
    { total: string | number; done: string | number; running: string | number }
  >(
    run.summary
      ? Object.entries(run.summary.kinds).map(([kind, c]) => [
          kind,
          { total: c.tasks_total ?? 0, done: c.tasks_done ?? 0, running: 0 },
        ])
      : kindTasks.map((t) => [t.kind, t]),
  );
  // A pruned run has no tasks left; its counts were frozen on the run when they were deleted.
  const frozen = run.summary;
  const byKind = frozen
    ? new Map(
        Object.entries(frozen.kinds).map(([kind, c]) => [
          kind,
          { kind, ...c } as unknown as (typeof progress)[number],
        ]),
      )
    : new Map(progress.map((p) => [p.kind, p]));
  const verification = storedVerification(run.verification);
  const counts = Object.fromEntries(
    frozen
      ? Object.entries(frozen.tasks).map(([s, n]) => [s, BigInt(n)])
      : taskCounts.map((t) => [t.status, BigInt(t.n)]),
  );
  return create(RunSchema, {
    id: run.id,
    tenantId: run.tenantId,
    source: run.source,
    sourceAccount: run.sourceAccount,
    kinds: run.kinds,
    status: STATUS[run.status],
    phases: run.plan.map((kinds) => ({ kinds })),
    currentPhase: run.currentPhase,
    progress: run.plan.flat().map((kind) => {
      const p = byKind.get(kind);
      return {
        kind,
        imported: BigInt(p?.created ?? 0),
        matched: BigInt(p?.matched ?? 0),
        alreadyHere: BigInt(p?.already_here ?? 0),
        skipped: BigInt(p?.skipped ?? 0),
        failed: BigInt(p?.failed ?? 0),
        tasksTotal: BigInt(tasksOf.get(kind)?.total ?? 0),
        tasksDone: BigInt(tasksOf.get(kind)?.done ?? 0),
        tasksRunning: BigInt(tasksOf.get(kind)?.running ?? 0),
      };
    }),
    tasks: {
      pending: counts.pending ?? 0n,
      running: counts.running ?? 0n,
      succeeded: counts.succeeded ?? 0n,
      failed: counts.failed ?? 0n,
      cancelled: counts.cancelled ?? 0n,
    },
    error: run.error ?? "",
    facts: Object.fromEntries(facts.map((f) => [f.key, f.value])),
    createdAt: timestampFromDate(run.createdAt),
    updatedAt: timestampFromDate(run.updatedAt),
    ...(run.startedAt ? { startedAt: timestampFromDate(run.startedAt) } : {}),
    ...(run.finishedAt ? { finishedAt: timestampFromDate(run.finishedAt) } : {}),
    // Only a finished run's verification describes it; a re-armed run is verified when it ends again.
    ...(TERMINAL_STATUSES.includes(run.status) && verification ? { verification } : {}),
    ...(budget
      ? {
          budget: {
            burstCapacity: budget.burstCapacity,
            burstUsed: budget.burstUsed,
            dailyKnown: budget.dailyRemaining !== null,
            dailyRemaining: BigInt(budget.dailyRemaining ?? 0),
            spent: BigInt(budget.spent),
            ...(budget.dailyResetAt ? { dailyResetAt: timestampFromDate(budget.dailyResetAt) } : {}),
            ...(budget.burstResetAt && budget.burstResetAt.getTime() > Date.now()
              ? { blockedUntil: timestampFromDate(budget.burstResetAt) }
              : {}),
          },
        }
      : {}),
  });
}

export async function loadRun(q: Queryable, runId: string): Promise<RunRow | undefined> {
  const [run] = await q.select().from(runs).where(eq(runs.id, runId));
  return run;
}
