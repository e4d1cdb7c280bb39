import type { TokenMinimum } from "@drover/crm-sandbox";
import { openBenchCluster } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * token_efficiency_list_bodies, token_efficiency_fetched_bodies, mail_lists_per_deal_with_mail:
 * how close an import and its catch-up come to the fewest tokens Pipedrive's API allows. A
 * real-shaped account (250 organizations, 700 persons, 500 deals of which about 80 % have mail,
 * ~1,200 messages, 150 leads, 700 activities, 700 notes; a round of edits and additions applied
 * mid-run) is imported whole by the engine (1 coordinator, 2 workers of lane width 4, default crm
 * settings: pages of 500), once on an account whose mail lists carry bodies and once on one whose
 * do not (a GET per body). Efficiency = the sandbox's minimum for its account (GET
 * /__sandbox/minimum: each list once at 500 a page, one mail list per deal with mail, bodies by id
 * only where the lists lack them and the message has one, one page per list for the catch-up) ÷
 * the tokens the sandbox charged the run (its stats, read the moment the run ends, before its
 * verification calls). Mail lists per deal with mail = mail list requests ÷ deals with mail, over
 * both runs. Goals: efficiency >= 0.95 in both modes, mail lists per deal with mail <= 1.01.
 */

const WORKERS = 2;
const LANE_WIDTH = 4;
const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes", "mail"];

function account(ctx: ScenarioContext, listIncludeBody: 0 | 1): Record<string, number> {
  return {
    seed: 33,
    organizations: scaled(ctx, 250, 10),
    persons: scaled(ctx, 700, 20),
    deals: scaled(ctx, 500, 20),
    leads: scaled(ctx, 150, 5),
    activities: scaled(ctx, 700, 20),
    notes: scaled(ctx, 700, 20),
    "mail-per-deal-max": 3,
    "heavy-mail-deal-rate": 0.1,
    "list-include-body": listIncludeBody,
    "change-edits": scaled(ctx, 10, 2),
    "change-adds": scaled(ctx, 5, 1),
    // Mid-run: after the first lists, while deals and mail are still to come.
    "changes-after-requests": 8,
    "latency-ms": 0,
    "burst-limit": 0,
    "transient-error-rate": 0,
    "malformed-rate": 0,
  };
}

interface ModeRun {
  efficiency: number;
  tokensSpent: number;
  minimum: TokenMinimum;
  mailLists: number;
  byEndpoint: Record<string, { requests: number; tokens: number }>;
  sandbox: Record<string, number>;
}

async function importOnce(ctx: ScenarioContext, listIncludeBody: 0 | 1): Promise<ModeRun> {
  const sandbox = account(ctx, listIncludeBody);
  const bench = await openBenchCluster({
    name: `token-efficiency-${listIncludeBody ? "list" : "fetch"}`,
    workers: WORKERS,
    laneWidth: LANE_WIDTH,
    sandbox,
  });
  try {
    await bench.resetSandboxStats();
    const outcome = await bench.runToEnd(
      { tenantId: "bench-tokens", sourceAccount: "bench-tokens", kinds: KINDS, settings: {} },
      600_000,
    );
    const minimum = (await (
      await fetch(`${bench.cluster.sandboxUrl}/__sandbox/minimum`)
    ).json()) as TokenMinimum;
    const spent = outcome.stats.tokensSpent;
    return {
      efficiency: minimum.tokens / spent,
      tokensSpent: spent,
      minimum,
      mailLists: outcome.stats.byEndpoint["/v1/deals/{id}/mailMessages"]?.requests ?? 0,
      byEndpoint: outcome.stats.byEndpoint,
      sandbox,
    };
  } finally {
    bench.closeLater();
  }
}

export const tokenEfficiencyScenario: Scenario = {
  name: "token_efficiency",
  selects: [
    "token_efficiency_list_bodies",
    "token_efficiency_fetched_bodies",
    "mail_lists_per_deal_with_mail",
  ],
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const list = await importOnce(ctx, 1);
    const fetched = await importOnce(ctx, 0);
    const dealsWithMail = list.minimum.dealsWithMail + fetched.minimum.dealsWithMail;
    return {
      figures: {
        token_efficiency_list_bodies: list.efficiency,
        token_efficiency_fetched_bodies: fetched.efficiency,
        mail_lists_per_deal_with_mail: (list.mailLists + fetched.mailLists) / dealsWithMail,
      },
      settings: { workers: WORKERS, laneWidth: LANE_WIDTH, kinds: KINDS, sandbox: list.sandbox, crm: {} },
      details: {
        listBodies: { tokensSpent: list.tokensSpent, minimum: list.minimum, byEndpoint: list.byEndpoint },
        fetchedBodies: {
          tokensSpent: fetched.tokensSpent,
          minimum: fetched.minimum,
          byEndpoint: fetched.byEndpoint,
        },
      },
    };
  },
};
