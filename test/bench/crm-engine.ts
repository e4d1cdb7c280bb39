import type { Database } from "@drover/db";
import { API_TOKEN, openBenchCluster, untilVerified } from "./harness.js";
import { plainCrmImport } from "./plain-crm-import.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * crm_engine_rows_per_s and crm_vs_plain_upsert: the CRM path's own cost when the API is not the
 * bottleneck. The demo's account (its default sizes, mail included; no latency, no rate limits,
 * no injected faults) imported whole by the engine (1 coordinator, 2 workers of lane width 4,
 * default crm settings), then — workers and coordinator stopped — by the plain loop
 * (plain-crm-import.ts) into the same tables for another tenant. Engine rate = source rows the run
 * accounted for ÷ its started_at → finished_at (every phase, the catch-up, finalizing); plain rate
 * = rows listed ÷ its first fetch to its last commit. `quick` imports a tenth of the account.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;

/** The demo's default account sizes (packages/demo/src/flags.ts); verify-cost.ts reads the same account. */
export const DEMO_ACCOUNT = {
  organizations: 1500,
  persons: 4000,
  deals: 3000,
  leads: 1000,
  activities: 4000,
  notes: 3000,
};

const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes", "mail"];

export function crmEngineSandbox(ctx: ScenarioContext): Record<string, number> {
  const sizes = Object.fromEntries(Object.entries(DEMO_ACCOUNT).map(([kind, n]) => [kind, scaled(ctx, n)]));
  return {
    seed: 42,
    ...sizes,
    "mail-per-deal-max": 3,
    "latency-ms": 0,
    "burst-limit": 0,
    "transient-error-rate": 0,
    "malformed-rate": 0,
  };
}

export const crmEngineScenario: Scenario = {
  name: "crm_engine",
  selects: ["crm_engine_rows_per_s", "crm_vs_plain_upsert"],
  async run(context: ScenarioContext): Promise<ScenarioResult> {
    const sandbox = crmEngineSandbox(context);
    const bench = await openBenchCluster({
      name: "crmengine",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
      env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    });
    try {
      const outcome = await bench.runToEnd(
        { tenantId: "bench-crm-engine", sourceAccount: "bench-crm", kinds: KINDS, settings: {} },
        600_000,
      );
      const engineRows = outcome.run.progress.reduce(
        (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
        0,
      );
      const byKind = Object.fromEntries(
        outcome.run.progress.map((p) => [
          p.kind,
          Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
        ]),
      );
      const engineSeconds = (outcome.finishedAt - outcome.startedAt) / 1000;
      const phases = await phaseTimes(bench.database.sql, outcome.run.id);
      // Its verification reads the whole account again: let it end before the plain loop runs.
      await untilVerified(bench.database.sql, outcome.run.id);
      await bench.stopEngine();

      const plain = await plainCrmImport(bench.database, {
        sandboxUrl: bench.cluster.sandboxUrl,
        apiToken: API_TOKEN,
        tenantId: "bench-crm-plain",
      });
      if (plain.rows !== engineRows)
        throw new Error(
          `the engine accounted for ${engineRows} rows (${JSON.stringify(byKind)}), the plain loop listed ${plain.rows} (${JSON.stringify(plain.byKind)})`,
        );
      const engineRate = engineRows / engineSeconds;
      const plainRate = plain.rows / plain.seconds;
      return {
        figures: { crm_engine_rows_per_s: engineRate, crm_vs_plain_upsert: engineRate / plainRate },
        settings: {
          workers: WORKERS,
          laneWidth: LANE_WIDTH,
          kinds: KINDS,
          sandbox,
          quick: context.quick,
        },
        details: {
          engine: {
            phases,
            rows: engineRows,
            byKind,
            seconds: engineSeconds,
            rowsPerSecond: engineRate,
            requests: outcome.stats.requests,
          },
          plain: { ...plain, rowsPerSecond: plainRate },
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};

/** Per phase of a run: its kinds, its tasks, their summed busy seconds and the phase's span. */
export function phaseTimes(sql: Database["sql"], runId: string) {
  return sql<{ phase: number; kinds: string; tasks: number; busy_s: number; span_s: number }[]>`
    select phase, string_agg(distinct kind, ',') as kinds, count(*)::int as tasks,
           round(sum(extract(epoch from finished_at - started_at))::numeric, 2)::float8 as busy_s,
           round(extract(epoch from max(finished_at) - min(created_at))::numeric, 2)::float8 as span_s
      from drover.tasks where run_id = ${runId}::uuid group by phase order by phase`;
}
