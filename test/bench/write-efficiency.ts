import { API_TOKEN, openBenchCluster, SOURCE } from "./harness.js";
import { plainWrite } from "./plain-writer.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * write_efficiency (report-only): engine rows/s ÷ plain-script rows/s, for the same 20,000 source
 * rows (8,000 organizations, 12,000 persons) with no latency and no limits, measured side by side
 * on one database and one sandbox: first the engine (1 coordinator, 2 workers of lane width 4,
 * tenant bench-engine), then — workers and coordinator stopped — the plain writer
 * (plain-writer.ts, tenant bench-plain). Engine time is the run's started_at to finished_at (seeding,
 * both kinds, the deferred company links, finalizing); the plain script's, its first fetch to its
 * last commit.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;

/** 8,000 organizations and 12,000 persons; under --quick 800 and 1,200. */
export function writeSandbox(ctx: ScenarioContext) {
  return {
    seed: 42,
    organizations: scaled(ctx, 8_000),
    persons: scaled(ctx, 12_000),
    deals: 0,
    leads: 0,
    activities: 0,
    notes: 0,
    "mail-per-deal-max": 0,
    "latency-ms": 0,
    "burst-limit": 0,
  };
}

const KINDS = ["organizations", "persons"];
const SETTINGS = { pageSize: "500", stripes: "4" };

export const writeEfficiencyScenario: Scenario = {
  name: "write_efficiency",
  selects: ["write_efficiency"],
  async run(ctx): Promise<ScenarioResult> {
    const sandbox = writeSandbox(ctx);
    const bench = await openBenchCluster({
      name: "write",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
      env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    });
    try {
      const outcome = await bench.runToEnd(
        { tenantId: "bench-engine", sourceAccount: "bench-write", kinds: KINDS, settings: SETTINGS },
        240_000,
      );
      const engineRows = outcome.run.progress.reduce(
        (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
        0,
      );
      const engineCreated = outcome.run.progress.reduce((n, p) => n + Number(p.imported), 0);
      const engineMatched = outcome.run.progress.reduce((n, p) => n + Number(p.matched), 0);
      const engineSeconds = (outcome.finishedAt - outcome.startedAt) / 1000;
      await bench.stopEngine();

      const plain = await plainWrite(bench.database.sql, {
        sandboxUrl: bench.cluster.sandboxUrl,
        apiToken: API_TOKEN,
        tenantId: "bench-plain",
        source: SOURCE,
        sourceAccount: "bench-write",
      });
      const expected = sandbox.organizations + sandbox.persons;
      if (engineRows !== expected || plain.rows !== expected)
        throw new Error(
          `expected ${expected} rows each; the engine accounted for ${engineRows}, the plain writer ${plain.rows}`,
        );
      const [check] = await bench.database.sql<{ engine: number; plain: number }[]>`
        select count(*) filter (where tenant_id = 'bench-engine')::int as engine,
               count(*) filter (where tenant_id = 'bench-plain')::int as plain
          from drover.ledger`;
      const engineRate = engineRows / engineSeconds;
      const plainRate = plain.rows / plain.seconds;
      return {
        figures: { write_efficiency: engineRate / plainRate },
        settings: {
          workers: WORKERS,
          laneWidth: LANE_WIDTH,
          kinds: KINDS,
          crmSettings: SETTINGS,
          sandbox,
        },
        details: {
          engine: {
            rows: engineRows,
            created: engineCreated,
            matched: engineMatched,
            seconds: engineSeconds,
            rowsPerSecond: engineRate,
            ledgerRows: check!.engine,
          },
          plain: { ...plain, rowsPerSecond: plainRate, ledgerRows: check!.plain },
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};
