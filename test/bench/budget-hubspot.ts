import { openBenchCluster } from "./harness.js";
import { type Scenario, type ScenarioResult, scaled } from "./scenario.js";

/**
 * budget_utilization_hubspot: a whole HubSpot import (companies, contacts, deals and the five
 * engagement types, with their associations and custom properties) against the sandbox's rolling
 * 10-second window at a Free/Starter account's 100 requests, 150 ms a request, by 2 workers of lane
 * width 4: eight lanes could send ~50 requests a second, the window admits 10, so the limit binds.
 *
 * utilization = requests admitted ÷ (100 × (last admitted − first admitted) / 10 s), as the sandbox
 * saw them; hubspot_429_count = the requests it refused. HubSpot's guidance is to stay under the
 * limits rather than learn them from 429s, so the goal is all of the window and none of its refusals.
 */

export const HUBSPOT_TEN_SECOND_LIMIT = 100;
const WINDOW_MS = 10_000;
const WORKERS = 2;
const LANE_WIDTH = 4;
const TOKEN = "bench-hubspot-token";

interface HubSpotStats {
  requests: number;
  admitted: number;
  byStatus: Record<string, number>;
  refusals: Record<string, number>;
  firstAdmittedAt?: number;
  lastAdmittedAt?: number;
  admittedBySecond: number[];
}

export const budgetHubSpotScenario: Scenario = {
  name: "budget_hubspot",
  selects: ["budget_utilization_hubspot", "hubspot_429_count"],
  async run(ctx): Promise<ScenarioResult> {
    const sandbox = {
      seed: 42,
      companies: scaled(ctx, 4000, 400),
      contacts: scaled(ctx, 10_000, 1000),
      deals: scaled(ctx, 6000, 600),
      engagements: scaled(ctx, 1200, 120),
      "custom-properties": 20,
      "archived-rate": 0.05,
      "latency-ms": 150,
      "ten-second-limit": HUBSPOT_TEN_SECOND_LIMIT,
      "daily-limit": 250_000,
      tokens: TOKEN,
    };
    const bench = await openBenchCluster({
      name: "budget-hubspot",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
      sandboxSource: "hubspot",
      env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    });
    try {
      await bench.resetSandboxStats();
      const outcome = await bench.runToEnd(
        {
          tenantId: "bench",
          sourceAccount: "bench-portal",
          kinds: [],
          settings: {},
          source: { name: "hubspot", baseUrl: bench.cluster.sandboxUrl, apiToken: TOKEN },
        },
        600_000,
      );
      // Where each kind's tasks ran, in seconds from the first admitted request: which chains were left.
      const timeline = await bench.database.sql<
        { kind: string; phase: number; tasks: number; from: number; to: number }[]
      >`
        SELECT kind, phase, count(*)::int AS tasks,
               extract(epoch FROM min(started_at))::float8 AS "from", extract(epoch FROM max(finished_at))::float8 AS "to"
          FROM drover.tasks GROUP BY kind, phase ORDER BY phase, min(started_at)`;
      await bench.stopAll();
      const stats = outcome.stats as unknown as HubSpotStats;
      if (stats.firstAdmittedAt === undefined || stats.lastAdmittedAt === undefined)
        throw new Error("the HubSpot sandbox admitted no request during the run");
      const spanMs = stats.lastAdmittedAt - stats.firstAdmittedAt;
      const allowed = (HUBSPOT_TEN_SECOND_LIMIT * spanMs) / WINDOW_MS;
      const rows = outcome.run.progress.reduce(
        (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
        0,
      );
      return {
        figures: {
          budget_utilization_hubspot: allowed > 0 ? stats.admitted / allowed : 0,
          hubspot_429_count: stats.byStatus["429"] ?? 0,
        },
        settings: { workers: WORKERS, laneWidth: LANE_WIDTH, sandbox },
        details: {
          admitted: stats.admitted,
          requests: stats.requests,
          byStatus: stats.byStatus,
          refusals: stats.refusals,
          requestSpanSeconds: spanMs / 1000,
          // Where the window went unused: requests admitted in each 10-second window of the run.
          admittedByTenSeconds: tens(stats.admittedBySecond),
          admittedBySecond: stats.admittedBySecond,
          chains: timeline.map((t) => ({
            kind: t.kind,
            phase: t.phase,
            tasks: t.tasks,
            seconds: [t.from, t.to].map(
              (at) => Math.round((at * 1000 - (stats.firstAdmittedAt ?? 0)) / 100) / 10,
            ),
          })),
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

function tens(bySecond: readonly number[]): number[] {
  const out: number[] = [];
  for (const [second, n] of bySecond.entries())
    out[Math.floor(second / 10)] = (out[Math.floor(second / 10)] ?? 0) + n;
  return out;
}
