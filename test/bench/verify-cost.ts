import { DEMO_ACCOUNT } from "./crm-engine.js";
import { openBenchCluster, untilVerified } from "./harness.js";
import type { Scenario, ScenarioResult } from "./scenario.js";

/**
 * verify_cost_share: the source requests a finished run's automatic verification makes ÷ those
 * its import made, on the demo's account (`pnpm demo`'s defaults: packages/demo/src/flags.ts),
 * both counted by the sandbox (/__sandbox/stats): reset before the run, read the moment the run
 * ends (the import's), reset, read once the verification is stored (the verification's). Goal
 * <= 0.1: checking a run must not cost a second import. A quick run takes a tenth of the account.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;

/** The demo's account at scale 1 (`pnpm demo` without flags), with its faults. */
const ACCOUNT = {
  ...DEMO_ACCOUNT,
  "mail-per-deal-max": 3,
  "transient-error-rate": 0.002,
  "malformed-rate": 0.005,
  seed: 42,
};
const SIZED = ["organizations", "persons", "deals", "leads", "activities", "notes"] as const;
const KINDS = [...SIZED, "mail"];

function account(quick: boolean): Record<string, number> {
  if (!quick) return { ...ACCOUNT };
  const out: Record<string, number> = { ...ACCOUNT };
  for (const kind of SIZED) out[kind] = Math.round(ACCOUNT[kind] / 10);
  return out;
}

export const verifyCostScenario: Scenario = {
  name: "verify_cost",
  selects: ["verify_cost_share"],
  async run(ctx?: { quick?: boolean }): Promise<ScenarioResult> {
    const sandbox = account(ctx?.quick === true);
    const bench = await openBenchCluster({
      name: "verify-cost",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
    });
    try {
      await bench.resetSandboxStats();
      const done = await bench.runToEnd(
        { tenantId: "bench-verify", sourceAccount: "bench-verify", kinds: KINDS, settings: {} },
        600_000,
      );
      // What the verification asks for starts after the run's end: the import's count is read
      // at that moment (runToEnd), and the counters are reset right after.
      await bench.resetSandboxStats();
      await untilVerified(bench.database.sql, done.run.id);
      const verification = await bench.sandboxStats();
      const [stored] = await bench.database.sql<{ ok: boolean | null; error: string | null }[]>`
        select (verification ->> 'ok')::boolean as ok, verification ->> 'error' as error
          from drover.runs where id = ${done.run.id}::uuid`;
      if (stored?.ok !== true)
        throw new Error(`the run's verification did not pass: ${stored?.error ?? "mismatches"}`);
      return {
        figures: { verify_cost_share: verification.requests / done.stats.requests },
        settings: { workers: WORKERS, laneWidth: LANE_WIDTH, kinds: KINDS, sandbox },
        details: {
          importRequests: done.stats.requests,
          importByCallType: done.stats.byCallType,
          verificationRequests: verification.requests,
          verificationByCallType: verification.byCallType,
          runSeconds: (done.finishedAt - done.startedAt) / 1000,
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};
