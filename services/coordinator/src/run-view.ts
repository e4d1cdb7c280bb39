import { budgets, FINISHED_RUN_STATUSES, type Queryable, type RunRow, runs } from "@drover/db";
import {
  estimateContext,
  type KindTaskCounts,
  taskCountsByKind,
  taskCountsByStatus,
  taskTallies,
  toRunInfo,
} from "@drover/engine";
import {
  create,
  fromProtoRunStatus,
  type Run,
  RunSchema,
  type RunStatus,
  timestampFromDate,
  toProtoRunStatus,
} from "@drover/proto";
import { and, eq, sql } from "drizzle-orm";
import { DEFAULT_BUDGET_OPTIONS } from "./budget-keeper.js";
import { dryRunReport } from "./dry-run-report.js";
import { followView } from "./follow-view.js";
import { type Eta, estimateEta } from "./run-eta.js";
import { type KindOutcome, kindOutcomes, type Sources } from "./run-outcomes.js";
import { storedVerification } from "./verification-dispatch.js";

/** Counts a pruned run froze on itself (run.summary.kinds), in the view's terms. */
function frozenOutcome(c: Record<string, number>): KindOutcome {
  return {
    created: BigInt(c.created ?? 0),
    matched: BigInt(c.matched ?? 0),
    alreadyHere: BigInt(c.already_here ?? 0),
    skipped: BigInt(c.skipped ?? 0),
    failed: BigInt(c.failed ?? 0),
  };
}

export const TERMINAL_STATUSES: readonly RunRow["status"][] = FINISHED_RUN_STATUSES;

export function toProtoStatus(status: RunRow["status"]): RunStatus {
  return toProtoRunStatus(status);
}

export function fromProtoStatus(status: RunStatus): RunRow["status"] | undefined {
  return fromProtoRunStatus(status);
}

/**
 * A run as the API shows it. Each source row is counted once, in its final outcome (run-outcomes.ts),
 * from what each window committed: what is shown was committed, once.
 */
export async function runView(q: Queryable, sources: Sources, run: RunRow): Promise<Run> {
  const [outcomes, taskCounts, kindTasks, [budget], facts] = await Promise.all([
    // A pruned run's counts were frozen on it with its tasks and notes deleted: nothing to count.
    run.summary ? new Map<string, KindOutcome>() : kindOutcomes(q, sources, run),
    taskCountsByStatus(q, run.id),
    taskCountsByKind(q, run.id),
    q
      .select()
      .from(budgets)
      .where(and(eq(budgets.source, run.source), eq(budgets.sourceAccount, run.sourceAccount))),
    q.execute<{ key: string; value: string }>(sql`
      select key, value::text as value from drover.run_facts where run_id = ${run.id}::uuid order by key`),
  ]);
  // A pruned run's per-kind task counts were frozen with its row counts (none before they were).
  const tasksOf: ReadonlyMap<string, KindTaskCounts> = run.summary
    ? new Map(
        Object.entries(run.summary.kinds).map(([kind, c]) => [
          kind,
          { total: c.tasks_total ?? 0, done: c.tasks_done ?? 0, running: 0 },
        ]),
      )
    : kindTasks;
  // A pruned run has no tasks left; its counts were frozen on the run when they were deleted.
  const frozen = run.summary;
  const byKind: ReadonlyMap<string, KindOutcome> = frozen
    ? new Map(Object.entries(frozen.kinds).map(([kind, c]) => [kind, frozenOutcome(c)]))
    : outcomes;
  const verification = storedVerification(run.verification);
  const counts = Object.fromEntries(
    frozen
      ? Object.entries(frozen.tasks).map(([s, n]) => [s, BigInt(n)])
      : Object.entries(taskCounts).map(([s, n]) => [s, BigInt(n ?? 0)]),
  );
  // A revert run calls no source: the account's budget says nothing of how long it needs.
  const eta =
    run.status === "running" && !run.revertsRunId ? await liveEta(q, sources, run, budget) : undefined;
  const revert = await revertInfo(q, run);
  const report = run.dryRun ? await dryRunReport(q, sources, run, byKind, budget, slotInterval) : undefined;
  return create(RunSchema, {
    ...(revert ? { revert } : {}),
    id: run.id,
    tenantId: run.tenantId,
    source: run.source,
    sourceAccount: run.sourceAccount,
    kinds: run.kinds,
    status: toProtoRunStatus(run.status),
    phases: run.plan.map((kinds) => ({ kinds })),
    currentPhase: run.currentPhase,
    progress: progressView(run, byKind, tasksOf),
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
    ...(eta ? { eta: etaView(eta) } : {}),
    ...(budget ? { budget: budgetView(sources, run, budget) } : {}),
    ...(run.dailyShare !== null ? { dailyShare: run.dailyShare } : {}),
    // A stopped run falls behind like a running one; a finished one stopped following when it ended.
    ...(run.follow
      ? { follow: followView(run.follow, TERMINAL_STATUSES.includes(run.status) ? run.finishedAt : null) }
      : {}),
    dryRun: run.dryRun,
    ...(report ? { dryRunReport: report } : {}),
  });
}

/**
 * A running run's ETA against its account's budget (run-eta.ts), from its source's estimate of the
 * work left; none for a source that cannot estimate. Before the first lease the account is paced
 * as the keeper would pace a new one.
 */
async function liveEta(
  q: Queryable,
  sources: Sources,
  run: RunRow,
  budget: typeof budgets.$inferSelect | undefined,
): Promise<Eta | undefined> {
  const estimate = sources.get(run.source)?.estimateWork;
  if (!estimate) return undefined;
  const work = await estimate(estimateContext(q, toRunInfo(run), await taskTallies(q, run.id)));
  const capacity = budget?.burstCapacity ?? DEFAULT_BUDGET_OPTIONS.defaultCapacity;
  const now = new Date();
  return estimateEta(
    work,
    {
      slotIntervalMs: slotInterval(capacity),
      dailyRemaining: budget?.dailyRemaining ?? undefined,
      dailyResetAt: budget?.dailyResetAt ?? undefined,
      dailyTokens: work.dailyTokens,
      blockedUntil:
        budget?.burstResetAt && budget.burstResetAt.getTime() > now.getTime()
          ? budget.burstResetAt
          : undefined,
    },
    now,
  );
}

/** The keeper's schedule on an account of this capacity (budget-keeper.ts intervalMs). */
export function slotInterval(capacity: number): number {
  const { windowMs, graceMs } = DEFAULT_BUDGET_OPTIONS;
  return capacity > 1 ? (windowMs + graceMs) / (capacity - 1) : windowMs + graceMs;
}

/**
 * The time zone whose midnight the run's source account resets its day at, as its source reads the
 * run's settings (Provider.dailyResetTimeZone); empty where the source states no rule, or where the
 * reset the keeper waits for (daily_reset_at) is not the rule's but a probe's or the one it learned
 * from the source.
 */
function dailyResetTimeZone(sources: Sources, run: RunRow, resetBy: string | null): string {
  if (resetBy === "probe" || resetBy === "learned") return "";
  return sources.get(run.source)?.dailyResetTimeZone?.(toRunInfo(run)) ?? "";
}

/** Which run a revert run reverts (and how far it got), or which run reverted this one. */
async function revertInfo(q: Queryable, run: RunRow) {
  if (run.revertsRunId) {
    // Per kind: what the revert's tasks counted, and what the reverted run still has created (kept
    // rows stay created; removed and gone ones were released): together the kind's total.
    const kinds = await q.execute<{
      kind: string;
      removed: string;
      gone: string;
      kept: string;
      left: string;
    }>(sql`
      select k.kind,
             coalesce(sum((t.stats ->> 'removed')::bigint), 0)::text as removed,
             coalesce(sum((t.stats ->> 'gone')::bigint), 0)::text as gone,
             coalesce(sum((t.stats ->> 'kept')::bigint), 0)::text as kept,
             (select count(*) from drover.ledger l
               where l.run_id = ${run.revertsRunId}::uuid and l.kind = k.kind and l.action = 'created')::text as left
        from unnest(${sql.param(run.plan.flat())}::text[]) with ordinality as k(kind, n)
        left join drover.tasks t on t.run_id = ${run.id}::uuid and t.kind = k.kind
       group by k.kind, k.n order by k.n`);
    const n = (v: string | undefined) => BigInt(v ?? 0);
    return {
      reverts: run.revertsRunId,
      force: run.revertForce,
      removed: kinds.reduce((s, k) => s + n(k.removed), 0n),
      kept: kinds.reduce((s, k) => s + n(k.kept), 0n),
      // A kind the reverted run created nothing of (its catch-up phase, mail without messages) has
      // nothing to show.
      kinds: kinds
        .filter((k) => n(k.left) + n(k.removed) + n(k.gone) > 0n)
        .map((k) => ({
          kind: k.kind,
          removed: n(k.removed),
          gone: n(k.gone),
          kept: n(k.kept),
          total: n(k.left) + n(k.removed) + n(k.gone),
        })),
    };
  }
  const [by] = await q.select({ id: runs.id }).from(runs).where(eq(runs.revertsRunId, run.id));
  return by ? { revertedBy: by.id } : undefined;
}

export async function loadRun(q: Queryable, runId: string): Promise<RunRow | undefined> {
  const [run] = await q.select().from(runs).where(eq(runs.id, runId));
  return run;
}

/** The account's budget as the run page and `drover status` show it. */
function budgetView(sources: Sources, run: RunRow, budget: typeof budgets.$inferSelect) {
  return {
    burstCapacity: budget.burstCapacity,
    burstUsed: budget.burstUsed,
    dailyKnown: budget.dailyRemaining !== null,
    dailyRemaining: BigInt(budget.dailyRemaining ?? 0),
    spent: BigInt(budget.spent),
    ...(budget.dailyResetAt ? { dailyResetAt: timestampFromDate(budget.dailyResetAt) } : {}),
    ...(budget.burstResetAt && budget.burstResetAt.getTime() > Date.now()
      ? { blockedUntil: timestampFromDate(budget.burstResetAt) }
      : {}),
    dailySpent:
      budget.exhaustedAt !== null &&
      budget.dailyResetAt !== null &&
      budget.dailyResetAt.getTime() > Date.now(),
    dailyResetTimeZone: dailyResetTimeZone(sources, run, budget.dailyResetBy),
  };
}

/** When the rest of the run should be done, and what it still costs the source. */
function etaView(eta: NonNullable<Awaited<ReturnType<typeof liveEta>>>) {
  return {
    seconds: BigInt(eta.seconds),
    text: eta.text,
    atLeast: eta.atLeast,
    requestsLeft: BigInt(eta.requests),
    tokensLeft: BigInt(eta.tokens),
    dailyResets: eta.dailyResets,
  };
}

/** Each kind's outcomes and tasks, in plan order. */
function progressView(
  run: RunRow,
  byKind: ReadonlyMap<string, KindOutcome>,
  tasksOf: ReadonlyMap<string, KindTaskCounts>,
) {
  return run.plan.flat().map((kind) => {
    const p = byKind.get(kind);
    return {
      kind,
      imported: p?.created ?? 0n,
      matched: p?.matched ?? 0n,
      alreadyHere: p?.alreadyHere ?? 0n,
      skipped: p?.skipped ?? 0n,
      failed: p?.failed ?? 0n,
      tasksTotal: BigInt(tasksOf.get(kind)?.total ?? 0),
      tasksDone: BigInt(tasksOf.get(kind)?.done ?? 0),
      tasksRunning: BigInt(tasksOf.get(kind)?.running ?? 0),
    };
  });
}
