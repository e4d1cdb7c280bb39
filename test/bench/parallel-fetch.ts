import { type BenchCluster, openBenchCluster, untilVerified } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * parallel_fetch_speedup: the mail phase's wall time with one body fetch in flight per task ÷ with
 * four, each deal carrying 8..12 messages, 150 ms latency, no burst limit. Two imports of the
 * same account by two tenants on one cluster, one after the other (two cores: side by side they
 * would slow each other down). Mail-phase wall time = the mail tasks' first created_at
 * (seeded as the deals phase's barrier passes) to their last finished_at.
 */

const LANE_WIDTH = 4;
const WORKERS = 2;

/** One mail task per lane of the two workers, whatever the number of deals. */
const MAIL_TASKS = 8;

/** 64 deals; under --quick 8, one per mail task. */
export function parallelSandbox(ctx: ScenarioContext) {
  return {
    seed: 42,
    organizations: 0,
    persons: 0,
    deals: scaled(ctx, 64, MAIL_TASKS),
    leads: 0,
    activities: 0,
    notes: 0,
    "mail-per-deal-max": 12,
    "heavy-mail-deal-rate": 1,
    // An account whose mail list does not take include_body: one GET per message, the path measured here.
    "list-include-body": 0,
    "latency-ms": 150,
    "burst-limit": 0,
  };
}

const KINDS = ["deals", "mail"];
/** 64 deals, 8 per mail task: 8 mail tasks, one per lane of the two workers. */
function baseSettings(ctx: ScenarioContext) {
  const deals = parallelSandbox(ctx).deals;
  return { pageSize: "100", stripes: "1", dealsPerMailTask: String(Math.ceil(deals / MAIL_TASKS)) };
}

interface MailPhase {
  seconds: number;
  tasks: number;
  messages: number;
  bodyRequests: number;
}

/**
 * The mail phase of one whole import by a tenant of its own, on the scenario's one cluster: the
 * previous run's verification is over and the sandbox's counters are reset before it starts, so
 * nothing but this run calls the source meanwhile.
 */
async function mailPhase(
  bench: BenchCluster,
  ctx: ScenarioContext,
  bodyConcurrency: number,
): Promise<MailPhase> {
  await bench.resetSandboxStats();
  const outcome = await bench.runToEnd(
    {
      tenantId: `bench-c${bodyConcurrency}`,
      sourceAccount: `bench-fetch-c${bodyConcurrency}`,
      kinds: KINDS,
      settings: { ...baseSettings(ctx), bodyConcurrency: String(bodyConcurrency) },
    },
    240_000,
  );
  const [phase] = await bench.database.sql<{ ms: number; tasks: number }[]>`
    select (extract(epoch from max(finished_at) - min(created_at)) * 1000)::float8 as ms, count(*)::int as tasks
      from drover.tasks where run_id = ${outcome.run.id}::uuid and kind = 'mail'`;
  const mail = outcome.run.progress.find((p) => p.kind === "mail");
  await untilVerified(bench.database.sql, outcome.run.id);
  return {
    seconds: phase!.ms / 1000,
    tasks: phase!.tasks,
    messages: mail ? Number(mail.imported + mail.matched + mail.alreadyHere + mail.skipped + mail.failed) : 0,
    bodyRequests: outcome.stats.byCallType.get ?? 0,
  };
}

export const parallelFetchScenario: Scenario = {
  name: "parallel_fetch",
  selects: ["parallel_fetch_speedup"],
  async run(ctx): Promise<ScenarioResult> {
    const bench = await openBenchCluster({
      name: "parallel-fetch",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox: parallelSandbox(ctx),
      env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
    });
    let serial: MailPhase;
    let parallel: MailPhase;
    try {
      serial = await mailPhase(bench, ctx, 1);
      parallel = await mailPhase(bench, ctx, 4);
    } finally {
      bench.closeLater();
    }
    if (serial.messages === 0 || parallel.messages === 0)
      throw new Error("the mail phase imported no messages");
    return {
      figures: { parallel_fetch_speedup: serial.seconds / parallel.seconds },
      settings: {
        workers: WORKERS,
        laneWidth: LANE_WIDTH,
        kinds: KINDS,
        crmSettings: baseSettings(ctx),
        bodyConcurrency: [1, 4],
        sandbox: parallelSandbox(ctx),
      },
      details: { serial, parallel },
    };
  },
};
