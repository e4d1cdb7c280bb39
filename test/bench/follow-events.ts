import { sql } from "drizzle-orm";
import { freePort } from "../support/free-port.js";
import { CHANGED_COLUMN } from "../support/mid-run-changes.js";
import { startTestReceiver } from "../support/receiver.js";
import { API_TOKEN, DATABASE_URL, openBenchCluster, SOURCE, sleep } from "./harness.js";
import { type Scenario, type ScenarioContext, type ScenarioResult, scaled } from "./scenario.js";

/**
 * follow_event_lag_p95_s: a follow run fed by Pipedrive's webhooks (the sandbox sends them, the
 * receiver stores them, the leader turns them into re-reads): from an edit in the sandbox until
 * the product row holds it, the 95th percentile over every edited row of several rounds. The
 * run's passes are an hour apart, so only the events can carry the edits. Goal <= 5 s.
 *
 * The receiver runs in the bench's own process (it is one HTTP handler and a JetStream publish);
 * the coordinator and the workers are processes as in every scenario. Rows are read back every
 * 100 ms: that is the figure's resolution.
 */
const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"];
const POLL_MS = 100;

export const followEventsScenario: Scenario = {
  name: "follow_events",
  selects: ["follow_event_lag_p95_s"],
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const rounds = scaled(ctx, 5, 2);
    const editsPerKind = scaled(ctx, 20, 4);
    const port = await freePort();
    const sandbox = {
      seed: 11,
      organizations: 300,
      persons: 600,
      deals: 400,
      leads: 150,
      activities: 500,
      notes: 400,
      "mail-per-deal-max": 0,
      "burst-limit": 0,
      "change-edits": editsPerKind,
    };
    const bench = await openBenchCluster({
      name: "follow-events",
      workers: 2,
      laneWidth: 4,
      sandbox,
      env: {
        DROVER_REAPER_INTERVAL_MS: "500",
        DROVER_WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${port}`,
        DROVER_FOLLOW_RECONCILE_SECONDS: "3600",
      },
    });
    const receiver = await startTestReceiver({
      databaseUrl: bench.testDb.url,
      queuePrefix: bench.queuePrefix,
      port,
      logLevel: "warn",
    });
    try {
      const { run } = await bench.client.startRun({
        tenantId: "follow-events",
        source: SOURCE,
        sourceAccount: "acct",
        kinds: [],
        sourceConfig: {
          baseUrl: bench.cluster.sandboxUrl,
          apiToken: API_TOKEN,
          settings: { pageSize: "100" },
        },
        follow: true,
      });
      const runId = run!.id;
      const deadline = Date.now() + 300_000;
      for (;;) {
        const shown = (await bench.client.getRun({ runId })).run?.follow;
        if (shown?.passes[0]?.finishedAt && shown.feed) {
          if (shown.feed !== "webhooks")
            throw new Error(`the run follows by ${shown.feed}: ${shown.feedReason}`);
          break;
        }
        if (Date.now() > deadline) throw new Error("the follow run's import did not finish in 5 minutes");
        await sleep(250);
      }

      const samples: number[] = [];
      const perRound: number[] = [];
      let expected = 0;
      for (let round = 1; round <= rounds; round++) {
        const suffix = round === 1 ? " (edited)" : ` (edited ${round})`;
        const started = Date.now();
        const res = await fetch(
          `${bench.cluster.sandboxUrl}/__sandbox/changes${round === 1 ? "" : "?again=1"}`,
          {
            method: "POST",
          },
        );
        if (!res.ok) throw new Error(`the sandbox refused round ${round} of changes: ${res.status}`);
        // Every row this round edited that the run created (a matched record keeps its owner's values).
        if (round === 1) expected = await editedRows(bench.database.db, bench.cluster.sandboxUrl);
        const seen = new Set<string>();
        const roundSamples: number[] = [];
        while (seen.size < expected) {
          if (Date.now() - started > 120_000)
            throw new Error(
              `round ${round}: ${seen.size} of ${expected} edits reached the product in 2 minutes`,
            );
          const now = Date.now();
          for (const key of await rowsHolding(bench.database.db, suffix))
            if (!seen.has(key)) {
              seen.add(key);
              roundSamples.push((now - started) / 1000);
            }
          if (seen.size < expected) await sleep(POLL_MS);
        }
        samples.push(...roundSamples);
        perRound.push(percentile(roundSamples, 0.95));
      }
      await bench.client.completeRun({ runId });
      return {
        figures: { follow_event_lag_p95_s: percentile(samples, 0.95) },
        settings: {
          sandbox,
          rounds,
          editsPerKind,
          pollMs: POLL_MS,
          reconcileSeconds: 3600,
          database: DATABASE_URL,
        },
        details: { samples: samples.length, expectedPerRound: expected, p95PerRound: perRound },
        rounds: { follow_event_lag_p95_s: perRound },
      };
    } finally {
      await receiver.stop();
      await bench.close();
    }
  },
};

/**
 * How many rows a round edits that reach a record: the rows the sandbox's truth says it edits,
 * less the malformed ones, that the run created (a matched record keeps its owner's values).
 */
async function editedRows(db: import("@drover/db").Db, sandboxUrl: string): Promise<number> {
  const truth = (await (await fetch(`${sandboxUrl}/__sandbox/truth?kind=${KINDS.join(",")}`)).json()) as {
    kinds: Record<string, { edited: string[]; malformed: string[] }>;
  };
  let n = 0;
  for (const kind of KINDS) {
    const t = truth.kinds[kind]!;
    const ids = t.edited.filter((id) => !t.malformed.includes(id));
    const [row] = await db.execute<{ n: number }>(sql`
      select count(*)::int as n from drover.ledger
       where tenant_id = 'follow-events' and kind = ${kind} and action = 'created'
         and source_id = any(${sql.param(ids)}::text[])`);
    n += row?.n ?? 0;
  }
  return n;
}

/** kind:source_id of every created record whose label ends with the round's edit. */
async function rowsHolding(db: import("@drover/db").Db, suffix: string): Promise<string[]> {
  const out: string[] = [];
  for (const kind of KINDS) {
    const { table, label } = CHANGED_COLUMN[kind]!;
    const rows = await db.execute<{ source_id: string }>(sql`
      select l.source_id from drover.ledger l join ${sql.identifier("app")}.${sql.identifier(table)} d on d.id = l.record_id
       where l.tenant_id = 'follow-events' and l.kind = ${kind} and l.action = 'created'
         and d.${sql.identifier(label)}::text like ${`%${suffix}`}`);
    for (const r of rows) out.push(`${kind}:${r.source_id}`);
  }
  return out;
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return Number(sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!.toFixed(3));
}
