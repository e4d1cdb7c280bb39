import { admittedRequests, openBenchCluster, type SandboxStats, tableWrites } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * budget_utilization_w1/_w2/_w4: a request-heavy import against a 20-per-2-s burst window with
 * 150 ms latency, by 1, 2 and 4 workers of lane width 4. Every deal carries 8..12 messages, so the
 * mail phase makes ~11 requests per deal (a list and the bodies), ~360 in all: the limit binds.
 *
 * utilization = admitted requests ÷ (20 × (last request − first request) / 2 s), the first and
 * last admitted requests as the sandbox saw them. The same runs give rate_limited_share,
 * forbidden_403_count and budget_writes_per_1000_calls (see budgetAggregates).
 */

export const BURST_LIMIT = 20;
export const BURST_WINDOW_MS = 2_000;
const LANE_WIDTH = 4;

/** 32 deals; under --quick 6 (two mail tasks, ~70 requests): the limit still binds, briefly. */
export function budgetSandbox(ctx: ScenarioContext) {
  return {
    seed: 42,
    organizations: 0,
    persons: 0,
    deals: scaled(ctx, 32, 6),
    leads: 0,
    activities: 0,
    notes: 0,
    "mail-per-deal-max": 12,
    "heavy-mail-deal-rate": 1,
    // An account whose mail list does not take include_body: one GET per message, the path measured here.
    "list-include-body": 0,
    "latency-ms": 150,
    "burst-limit": BURST_LIMIT,
    "burst-window-ms": BURST_WINDOW_MS,
  };
}

const KINDS = ["deals", "mail"];
/** Small deal pages and four deals per mail task: more tasks than lanes, so every worker has work. */
const SETTINGS = { pageSize: "8", stripes: "2", dealsPerMailTask: "4", bodyConcurrency: "4" };

export interface BudgetCounters {
  requests: number;
  admitted: number;
  rateLimited: number;
  blocked: number;
  budgetUpdates: number;
  budgetInserts: number;
}

export function budgetScenario(workers: number): Scenario {
  const figure = `budget_utilization_w${workers}`;
  return {
    name: `budget_w${workers}`,
    selects: [figure, "rate_limited_share", "forbidden_403_count", "budget_writes_per_1000_calls"],
    async run(ctx): Promise<ScenarioResult> {
      const sandbox = budgetSandbox(ctx);
      const bench = await openBenchCluster({
        name: `budget-w${workers}`,
        workers,
        laneWidth: LANE_WIDTH,
        sandbox,
        env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
      });
      try {
        const before = await tableWrites(bench.database, "drover", "budgets");
        await bench.resetSandboxStats();
        const outcome = await bench.runToEnd(
          { tenantId: "bench", sourceAccount: "bench-company", kinds: KINDS, settings: SETTINGS },
          240_000,
        );
        await bench.stopAll();
        const after = await tableWrites(bench.database, "drover", "budgets");
        const stats: SandboxStats = outcome.stats;
        if (typeof stats.firstRequestAt !== "number" || typeof stats.lastRequestAt !== "number")
          throw new Error(
            "the sandbox's stats carry no firstRequestAt/lastRequestAt: no request was admitted",
          );
        const spanMs = stats.lastRequestAt - stats.firstRequestAt;
        const allowed = (BURST_LIMIT * spanMs) / BURST_WINDOW_MS;
        const admitted = admittedRequests(stats);
        const counters: BudgetCounters = {
          requests: stats.requests,
          admitted,
          rateLimited: stats.rateLimited,
          blocked: stats.blocked,
          budgetUpdates: after.updates - before.updates,
          budgetInserts: after.inserts - before.inserts,
        };
        const rows = outcome.run.progress.reduce(
          (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
          0,
        );
        return {
          figures: { [figure]: allowed > 0 ? admitted / allowed : 0 },
          settings: {
            workers,
            laneWidth: LANE_WIDTH,
            kinds: KINDS,
            crmSettings: SETTINGS,
            sandbox,
          },
          details: {
            counters,
            byStatus: stats.byStatus,
            byCallType: stats.byCallType,
            requestSpanSeconds: spanMs / 1000,
            allowedRequests: allowed,
            runSeconds: (outcome.finishedAt - outcome.startedAt) / 1000,
            rows,
            logs: bench.cluster.logDir,
          },
        };
      } finally {
        bench.closeLater();
      }
    },
  };
}

/** The figures over every budget run that ran: 429 share, 403 count, budget-row UPDATEs per 1,000 calls. */
export function budgetAggregates(results: readonly ScenarioResult[]): Record<string, number> {
  const all = results
    .map((r) => r.details.counters as BudgetCounters | undefined)
    .filter((c): c is BudgetCounters => c !== undefined);
  if (all.length === 0) return {};
  const sum = (f: (c: BudgetCounters) => number) => all.reduce((n, c) => n + f(c), 0);
  const requests = sum((c) => c.requests);
  return {
    rate_limited_share: requests > 0 ? sum((c) => c.rateLimited) / requests : 0,
    forbidden_403_count: sum((c) => c.blocked),
    budget_writes_per_1000_calls: requests > 0 ? (sum((c) => c.budgetUpdates) * 1000) / requests : 0,
  };
}
