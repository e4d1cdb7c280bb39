import { openBenchCluster } from "./harness.js";
import type { Scenario, ScenarioResult } from "./scenario.js";

/**
 * fairness_jain: Jain's index, (Σx)² ÷ (n·Σx²), of the per-run throughput of 8 equal runs of 8
 * tenants started together on one worker pool, the source's API not the bottleneck (no rate limit,
 * a little latency). 1 means every run got the same share; 1/8 that one run got everything.
 * Throughput = the rows each run's windows committed (drover.window_commits) while all 8 were
 * writing: from the last run's first window to the first run's last window.
 * Goal >= 0.9.
 */

const RUNS = 8;
const WORKERS = 2;
const LANE_WIDTH = 4;
/** Rows per run: organizations + persons; `quick` takes a tenth. */
const ORGANIZATIONS = 1_000;
const PERSONS = 2_000;

export interface SizeOptions {
  /** A tenth of the data, for a quick look that the scenario works (`pnpm bench -- --quick`). */
  quick?: boolean;
}

export function jainIndex(values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  const squares = values.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? 1 : (sum * sum) / (values.length * squares);
}

export const fairnessScenario: Scenario = {
  name: "fairness",
  selects: ["fairness_jain"],
  async run(options: SizeOptions = {}): Promise<ScenarioResult> {
    const scale = options.quick ? 0.1 : 1;
    const sandbox = {
      seed: 17,
      organizations: Math.round(ORGANIZATIONS * scale),
      persons: Math.round(PERSONS * scale),
      deals: 0,
      leads: 0,
      activities: 0,
      notes: 0,
      "mail-per-deal-max": 0,
      "latency-ms": 20,
      "burst-limit": 0,
    };
    // Four chains per list: each run could use the whole pool on its own.
    const settings = { pageSize: options.quick ? "25" : "100", partitions: "4" };
    const bench = await openBenchCluster({
      name: "fairness",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
      env: { DROVER_REAPER_INTERVAL_MS: "1000" },
    });
    try {
      const outcomes = await Promise.all(
        Array.from({ length: RUNS }, (_, i) =>
          bench.runToEnd(
            {
              tenantId: `fair-${i + 1}`,
              sourceAccount: `fair-account-${i + 1}`,
              kinds: ["organizations", "persons"],
              settings,
            },
            600_000,
          ),
        ),
      );
      const ids = outcomes.map((o) => o.run.id);
      // The span in which all 8 were writing: from the last run's first window to the first
      // run's last window (a run's last phase, the catch-up, writes nothing and would blur it).
      const [span] = await bench.database.sql<{ from: number; to: number }[]>`
        select max(first)::float8 as from, min(last)::float8 as to from (
          select extract(epoch from min(committed_at)) * 1000 as first, extract(epoch from max(committed_at)) * 1000 as last
            from drover.window_commits where run_id = any(${ids}::uuid[]) group by run_id) per_run`;
      const from = span!.from;
      const to = span!.to;
      if (to - from < 1_000)
        throw new Error(
          `the runs wrote side by side for only ${Math.round(to - from)} ms (one finished writing before another began): too small to judge`,
        );
      const rows = await bench.database.sql<{ run_id: string; rows: number }[]>`
        select run_id::text, coalesce(sum(rows), 0)::int as rows from drover.window_commits
         where run_id = any(${ids}::uuid[])
           and committed_at >= to_timestamp(${from / 1000}) and committed_at <= to_timestamp(${to / 1000})
         group by run_id`;
      const byRun = new Map(rows.map((r) => [r.run_id, r.rows]));
      const seconds = (to - from) / 1000;
      const throughput = ids.map((id) => (byRun.get(id) ?? 0) / seconds);
      const wholeRun = outcomes.map(
        (o) => ((ORGANIZATIONS + PERSONS) * scale) / ((o.finishedAt - o.startedAt) / 1000),
      );
      return {
        figures: { fairness_jain: jainIndex(throughput) },
        settings: { runs: RUNS, workers: WORKERS, laneWidth: LANE_WIDTH, sandbox, crmSettings: settings },
        details: {
          writingSideBySideSeconds: seconds,
          rowsPerSecondWhileCompeting: throughput,
          runSeconds: outcomes.map((o) => (o.finishedAt - o.startedAt) / 1000),
          jainOfWholeRuns: jainIndex(wholeRun),
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};
