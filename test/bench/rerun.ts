import type { Run } from "@drover/proto";
import { openBenchCluster, untilVerified } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * rerun_vs_first: the wall time of a re-run of a tenant already imported ÷ that of its first import,
 * same account, same cluster, nothing changed at the source, no API latency. The re-run reads every
 * page again; what it must not pay again is the writing (each window asks the
 * ledger once which rows it holds and writes nothing for them). Run time = drover.runs started_at
 * to finished_at (every phase, the catch-up pass and finalizing). Goal <= 0.25.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;

/** 24,500 rows over six kinds; under --quick 2,450. */
export function rerunSandbox(ctx: ScenarioContext) {
  return {
    seed: 42,
    organizations: scaled(ctx, 4_000),
    persons: scaled(ctx, 8_000),
    deals: scaled(ctx, 4_000),
    leads: scaled(ctx, 1_500),
    activities: scaled(ctx, 4_000),
    notes: scaled(ctx, 3_000),
    "mail-per-deal-max": 0,
    "latency-ms": 0,
    "burst-limit": 0,
  };
}

const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"];
const SETTINGS = { pageSize: "500", stripes: "4" };

function counts(run: Run) {
  const sum = (pick: (p: Run["progress"][number]) => bigint) =>
    run.progress.reduce((n, p) => n + Number(pick(p)), 0);
  return {
    imported: sum((p) => p.imported),
    matched: sum((p) => p.matched),
    alreadyHere: sum((p) => p.alreadyHere),
    skipped: sum((p) => p.skipped),
    failed: sum((p) => p.failed),
  };
}

export const rerunScenario: Scenario = {
  name: "rerun",
  selects: ["rerun_vs_first"],
  async run(ctx): Promise<ScenarioResult> {
    const sandbox = rerunSandbox(ctx);
    const bench = await openBenchCluster({
      name: "rerun",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
      env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    });
    try {
      const request = {
        tenantId: "bench-rerun",
        sourceAccount: "bench-rerun",
        kinds: KINDS,
        settings: SETTINGS,
      };
      // The first run's automatic verification reads the whole account again: it is let finish
      // before the re-run starts, so the re-run does not share the machine with it.
      await bench.resetSandboxStats();
      const first = await bench.runToEnd(request, 300_000);
      await untilVerified(bench.database.sql, first.run.id);
      await bench.resetSandboxStats();
      const again = await bench.runToEnd(request, 300_000);
      const firstCounts = counts(first.run);
      const againCounts = counts(again.run);
      if (againCounts.imported + againCounts.matched !== 0)
        throw new Error(`the re-run wrote records: ${JSON.stringify(againCounts)}`);
      const phases = async (runId: string) =>
        bench.database.sql<{ phase: number; tasks: number; busy_s: number; span_s: number }[]>`
          select phase, count(*)::int as tasks,
                 round(sum(extract(epoch from finished_at - started_at))::numeric, 2)::float8 as busy_s,
                 round(extract(epoch from max(finished_at) - min(created_at))::numeric, 2)::float8 as span_s
            from drover.tasks where run_id = ${runId}::uuid group by phase order by phase`;
      const firstSeconds = (first.finishedAt - first.startedAt) / 1000;
      const againSeconds = (again.finishedAt - again.startedAt) / 1000;
      return {
        figures: { rerun_vs_first: againSeconds / firstSeconds },
        settings: {
          workers: WORKERS,
          laneWidth: LANE_WIDTH,
          kinds: KINDS,
          crmSettings: SETTINGS,
          sandbox,
        },
        details: {
          first: {
            seconds: firstSeconds,
            ...firstCounts,
            requests: first.stats.requests,
            phases: await phases(first.run.id),
          },
          rerun: {
            seconds: againSeconds,
            ...againCounts,
            requests: again.stats.requests,
            phases: await phases(again.run.id),
          },
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};
