import { openBenchCluster } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * dry_run_cost_error: how far a dry run's estimate of a real run's source requests (GetRun's
 * dry_run_report.requests, the calls its own walk made, counted by the workers) is from what the
 * real run then asks of the source (the sandbox's /__sandbox/stats, reset before the run and read
 * the moment it ends, before its verification calls): |estimated − actual| / actual. Both runs go
 * to one tenant on one account, the dry run first (it writes nothing, so the real run starts from
 * the same empty product). Goal <= 0.1: the estimate is what an operator plans a migration's days by.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;
const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes", "mail"];

function account(ctx: ScenarioContext): Record<string, number> {
  return {
    organizations: scaled(ctx, 600, 20),
    persons: scaled(ctx, 1500, 40),
    deals: scaled(ctx, 1000, 30),
    leads: scaled(ctx, 300, 10),
    activities: scaled(ctx, 1500, 40),
    notes: scaled(ctx, 1000, 30),
    "mail-per-deal-max": 3,
    "malformed-rate": 0.005,
    seed: 42,
  };
}

export const dryRunCostScenario: Scenario = {
  name: "dry_run_cost",
  selects: ["dry_run_cost_error"],
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const sandbox = account(ctx);
    const settings = { pageSize: "100", stripes: "2" };
    const bench = await openBenchCluster({
      name: "dry-run-cost",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
    });
    try {
      const request = { tenantId: "bench-dry", sourceAccount: "bench-dry", kinds: KINDS, settings };
      await bench.resetSandboxStats();
      const dry = await bench.runToEnd({ ...request, dryRun: true }, 600_000);
      const report = dry.run.dryRunReport;
      if (!report) throw new Error(`dry run ${dry.run.id} carries no report`);
      await bench.resetSandboxStats();
      const real = await bench.runToEnd(request, 600_000);
      const estimated = Number(report.requests);
      const actual = real.stats.requests;
      return {
        figures: { dry_run_cost_error: Math.abs(estimated - actual) / actual },
        settings: { workers: WORKERS, laneWidth: LANE_WIDTH, kinds: KINDS, sandbox, crm: settings },
        details: {
          estimatedRequests: estimated,
          estimatedTokens: Number(report.tokens),
          estimatedDuration: report.durationText,
          estimatedByKind: Object.fromEntries(report.kinds.map((k) => [k.kind, Number(k.requests)])),
          dryRunSandboxRequests: dry.stats.requests,
          actualRequests: actual,
          actualTokens: real.stats.tokensSpent,
          actualByCallType: real.stats.byCallType,
          wouldCreate: Object.fromEntries(report.kinds.map((k) => [k.kind, Number(k.wouldCreate)])),
          imported: Object.fromEntries(real.run.progress.map((p) => [p.kind, Number(p.imported)])),
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};
