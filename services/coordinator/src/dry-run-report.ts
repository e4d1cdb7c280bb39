import type { budgets, Queryable, RunRow } from "@drover/db";
import { estimateContext, MATCHED_BY, MISSING_PARENT, taskTallies, toRunInfo } from "@drover/engine";
import { create, type DryRunReport, DryRunReportSchema } from "@drover/proto";
import { sql } from "drizzle-orm";
import { DEFAULT_BUDGET_OPTIONS } from "./budget-keeper.js";
import { estimateEta } from "./run-eta.js";
import { currentNoteGroups, type KindOutcome, type Sources } from "./run-outcomes.js";

/** Sample ids per reason group, as ListNotes gives by default. */
const SAMPLES = 5;

/**
 * What a dry run says a real run would do and cost (engine dry-run.ts): per kind, its outcomes as
 * the run view counts them (would create = created, would match = matched by a writer's rule plus
 * already here by an existing ledger row, would skip, would fail), the reasons grouped as ListNotes
 * groups them, and the source calls its walk made: the real run makes the same calls, so they are
 * its cost, and their time at the account's learned budget (burst pace, today's allowance and the
 * daily resets after it) is the real run's, estimated as a live run's ETA is (run-eta.ts).
 */
export async function dryRunReport(
  q: Queryable,
  sources: Sources,
  run: RunRow,
  outcomes: ReadonlyMap<string, KindOutcome>,
  budget: typeof budgets.$inferSelect | undefined,
  slotIntervalMs: (capacity: number) => number,
): Promise<DryRunReport> {
  const [stats, groups] = await Promise.all([
    q.execute<{ kind: string; key: string; n: string }>(sql`
      select t.kind, s.key, sum(s.value::bigint)::text as n
        from drover.tasks t, jsonb_each_text(t.stats) s
       where t.run_id = ${run.id}::uuid
         and (s.key in ('source_requests', 'source_tokens') or s.key like ${`${MATCHED_BY}%`}
              or s.key like ${`${MISSING_PARENT}%`})
       group by t.kind, s.key`),
    currentNoteGroups(q, sources, run, { samples: SAMPLES }),
  ]);
  const statOf = (kind: string, key: string) =>
    BigInt(stats.find((s) => s.kind === kind && s.key === key)?.n ?? 0);
  const kinds = run.plan.flat().map((kind) => {
    const o = outcomes.get(kind);
    const matchedBy = Object.fromEntries(
      stats
        .filter((s) => s.kind === kind && s.key.startsWith(MATCHED_BY))
        .map((s) => [s.key.slice(MATCHED_BY.length), BigInt(s.n)]),
    );
    const missingParents = Object.fromEntries(
      stats
        .filter((s) => s.kind === kind && s.key.startsWith(MISSING_PARENT))
        .map((s) => [s.key.slice(MISSING_PARENT.length), BigInt(s.n)]),
    );
    const matched = o?.matched ?? 0n;
    const alreadyHere = o?.alreadyHere ?? 0n;
    return {
      kind,
      wouldCreate: o?.created ?? 0n,
      wouldMatch: matched + alreadyHere,
      matchedBy,
      alreadyHere,
      wouldSkip: o?.skipped ?? 0n,
      wouldFail: o?.failed ?? 0n,
      reasons: groups
        .filter((g) => g.kind === kind && g.level !== "info")
        .map((g) => ({
          level: g.level,
          kind: g.kind,
          reason: g.reason,
          count: g.count,
          sampleSubjectIds: g.sampleSubjectIds,
        })),
      missingParents,
      requests: statOf(kind, "source_requests"),
      tokens: statOf(kind, "source_tokens"),
    };
  });
  const requests = kinds.reduce((n, k) => n + k.requests, 0n);
  const tokens = kinds.reduce((n, k) => n + k.tokens, 0n);
  const work = await sources
    .get(run.source)
    ?.estimateWork?.(estimateContext(q, toRunInfo(run), await taskTallies(q, run.id)));
  const now = new Date();
  const eta = estimateEta(
    {
      kinds: kinds.map((k) => ({
        kind: k.kind,
        requests: Number(k.requests),
        tokens: Number(k.tokens),
        atLeast: run.status === "running" || run.status === "pending" || run.status === "stopping",
      })),
    },
    {
      slotIntervalMs: slotIntervalMs(budget?.burstCapacity ?? DEFAULT_BUDGET_OPTIONS.defaultCapacity),
      dailyRemaining: budget?.dailyRemaining ?? undefined,
      dailyResetAt: budget?.dailyResetAt ?? undefined,
      dailyTokens: work?.dailyTokens,
    },
    now,
  );
  // The budget-days are counted at the allowance the run states (dailyTokens), else at what the
  // source said it had left today: a floor of the account's day when part of it was spent.
  const dailyTokens = work?.dailyTokens ?? budget?.dailyRemaining ?? 0;
  return create(DryRunReportSchema, {
    kinds,
    requests,
    tokens,
    seconds: BigInt(eta.seconds),
    durationText: eta.text,
    dailyResets: eta.dailyResets,
    dailyTokens: BigInt(dailyTokens),
    budgetDays: dailyTokens > 0 ? Number(tokens) / dailyTokens : 0,
  });
}
