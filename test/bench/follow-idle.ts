import { join } from "node:path";
import { type ServiceProcess, spawnService } from "@drover/local-cluster";
import { freePort } from "../support/free-port.js";
import { startTestReceiver } from "../support/receiver.js";
import { API_TOKEN, openBenchCluster, SOURCE, sleep } from "./harness.js";
import type { Scenario, ScenarioContext, ScenarioResult } from "./scenario.js";

/**
 * follow_tokens_idle_vs_polling: the tokens a following run spends while nothing changes, fed by
 * webhooks (a reconcile every DROVER_FOLLOW_RECONCILE_SECONDS), ÷ the tokens a run polling at the
 * default interval spends over the same time. Time is scaled: 300 s (the default interval) and
 * 3600 s (the default reconcile) become 5 s and 60 s (÷ 60), and the runs are watched for 120 s,
 * two scaled hours. Two accounts of the same shape on two sandboxes, both idle; one refuses
 * webhooks (`--webhooks-refused 1`), so its run polls. Each pass reads every kind's changes and
 * sweeps every kind for deletions, the same on both. Goal <= 0.1.
 */
const SCALE = 60;
/** Under --quick time runs faster still: 2 s and 24 s, watched for one scaled hour. */
const QUICK_SCALE_OF_TIME = 150;

function sandboxFlags(seed: number) {
  return {
    seed,
    organizations: 200,
    persons: 400,
    deals: 300,
    leads: 100,
    activities: 300,
    notes: 300,
    "mail-per-deal-max": 0,
    "burst-limit": 0,
  };
}

export const followIdleScenario: Scenario = {
  name: "follow_idle",
  selects: ["follow_tokens_idle_vs_polling"],
  async run(ctx: ScenarioContext): Promise<ScenarioResult> {
    const scale = ctx.quick ? QUICK_SCALE_OF_TIME : SCALE;
    const intervalS = 300 / scale;
    const reconcileS = 3600 / scale;
    const watchS = ctx.quick ? reconcileS : 2 * reconcileS;
    const port = await freePort();
    const bench = await openBenchCluster({
      name: "follow-idle",
      workers: 2,
      laneWidth: 4,
      sandbox: sandboxFlags(21),
      env: {
        DROVER_REAPER_INTERVAL_MS: "500",
        DROVER_WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${port}`,
        DROVER_FOLLOW_RECONCILE_SECONDS: String(reconcileS),
      },
    });
    let polled: ServiceProcess | undefined;
    const receiver = await startTestReceiver({
      databaseUrl: bench.testDb.url,
      queuePrefix: bench.queuePrefix,
      port,
      logLevel: "warn",
    });
    try {
      polled = await spawnService({
        name: "crm-sandbox-polled",
        entry: "packages/crm-sandbox/src/main.ts",
        args: [
          "--port",
          "0",
          ...Object.entries({ ...sandboxFlags(22), "webhooks-refused": 1 }).flatMap(([k, v]) => [
            `--${k}`,
            String(v),
          ]),
        ],
        readyEvent: "listening",
        logDir: join(bench.cluster.logDir),
      });
      const accounts = {
        webhooks: { url: bench.cluster.sandboxUrl, account: "hooked" },
        polling: { url: String(polled.ready.url), account: "polled" },
      };
      const runIds: Record<string, string> = {};
      for (const [name, a] of Object.entries(accounts)) {
        const { run } = await bench.client.startRun({
          tenantId: `idle-${name}`,
          source: SOURCE,
          sourceAccount: a.account,
          kinds: [],
          sourceConfig: { baseUrl: a.url, apiToken: API_TOKEN, settings: { pageSize: "500" } },
          follow: true,
          followIntervalSeconds: intervalS,
        });
        runIds[name] = run!.id;
      }
      const deadline = Date.now() + 300_000;
      for (const [name, runId] of Object.entries(runIds)) {
        for (;;) {
          const f = (await bench.client.getRun({ runId })).run?.follow;
          if (f?.passes[0]?.finishedAt && f.feed) {
            const want = name === "webhooks" ? "webhooks" : "polling";
            if (f.feed !== want) throw new Error(`the ${name} run follows by ${f.feed}: ${f.feedReason}`);
            break;
          }
          if (Date.now() > deadline) throw new Error(`the ${name} run's import did not finish in 5 minutes`);
          await sleep(250);
        }
      }
      // Both idle from here: count what each spends over the same window.
      for (const a of Object.values(accounts))
        await fetch(`${a.url}/__sandbox/reset-stats`, { method: "POST" });
      await sleep(watchS * 1000);
      const spent: Record<string, { tokens: number; requests: number }> = {};
      for (const [name, a] of Object.entries(accounts)) {
        const stats = (await (await fetch(`${a.url}/__sandbox/stats`)).json()) as {
          tokensSpent: number;
          requests: number;
        };
        spent[name] = { tokens: stats.tokensSpent, requests: stats.requests };
      }
      const passes: Record<string, number> = {};
      for (const [name, runId] of Object.entries(runIds)) {
        passes[name] = (await bench.client.getRun({ runId })).run?.follow?.passes.length ?? 0;
        await bench.client.completeRun({ runId });
      }
      return {
        figures: {
          follow_tokens_idle_vs_polling: Number((spent.webhooks!.tokens / spent.polling!.tokens).toFixed(3)),
        },
        settings: {
          scale,
          intervalSeconds: intervalS,
          reconcileSeconds: reconcileS,
          watchSeconds: watchS,
          sandbox: sandboxFlags(21),
        },
        details: { spent, passes },
      };
    } finally {
      await receiver.stop();
      await polled?.stop();
      await bench.close();
    }
  },
};
