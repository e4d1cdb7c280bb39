import { RunStatus } from "@drover/proto";
import type { RunningReceiver } from "@drover/receiver";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/free-port.js";
import { API_TOKEN, type Cluster, SETTINGS, startCluster, until } from "../support/in-process.js";
import { midRunChangeProblems } from "../support/mid-run-changes.js";
import { startTestReceiver } from "../support/receiver.js";

/**
 * Pipedrive bans a webhook after 10 failed first attempts and loses what happens during the ban.
 * Here the receiver is down when the customer's changes happen (a killed receiver): every delivery
 * fails, the sandbox bans the webhooks and loses the events, and nothing of them reaches the
 * product. The cutover's reconciling pass reads them: the run ends exact.
 */
const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"];
let c: Cluster;
let port: number;
let receiver: RunningReceiver | undefined;

const startOurReceiver = async () =>
  startTestReceiver({ databaseUrl: c.testDb.url, queuePrefix: c.prefix, port: port, logLevel: "silent" });

beforeAll(async () => {
  port = await freePort();
  c = await startCluster({
    workers: 2,
    // Pipedrive's delays × 0.001: retries after 3, 30, 150 ms, a ban of 1.8 s.
    sandbox: { changeEdits: 3, changeAdds: 2, changeDeletes: 1, mailPerDealMax: 0, webhookTimeScale: 0.001 },
    coordinatorEnv: {
      DROVER_WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${port}`,
      DROVER_REAPER_INTERVAL_MS: "200",
    },
  });
  receiver = await startOurReceiver();
}, 60_000);

afterAll(async () => {
  await receiver?.stop();
  await c?.close();
});

describe("a follow run whose webhook was banned", () => {
  it("loses the ban's events and still ends exact at cutover", async () => {
    const { run } = await c.client.startRun({
      tenantId: "banned",
      source: "crm",
      sourceAccount: "acct",
      kinds: [],
      sourceConfig: { baseUrl: c.sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
      follow: true,
    });
    const runId = run!.id;
    await until(
      async () =>
        (
          await c.database.db.execute<{ follow: { passes: { finishedAt: string | null }[] } }>(sql`
            select follow from drover.runs where id = ${runId}::uuid`)
        )[0]!.follow.passes[0]?.finishedAt,
      90_000,
      "the import to finish",
    );
    expect((await c.client.getRun({ runId })).run?.follow?.feed).toBe("webhooks");

    // The receiver is killed; the customer changes 6 kinds × (3 edits + 2 adds + 1 delete).
    await receiver!.stop();
    receiver = undefined;
    c.sandbox.applyChanges();
    await until(
      () => {
        const s = c.sandbox.webhookStats();
        return s.pending === 0 && s.lost === 36 ? s : undefined;
      },
      20_000,
      "every event to be lost (banned, or out of retries)",
    );
    expect(c.sandbox.webhookStats().delivered).toBe(0);
    receiver = await startOurReceiver();

    const truth = c.sandbox.truth();
    const changes = truth.kinds as unknown as Parameters<typeof midRunChangeProblems>[2];
    const scope = { tenantId: "banned", sourceAccount: "acct" };
    // Nothing reached the product: no event, and the next pass is an hour away.
    await new Promise((done) => setTimeout(done, 2_000));
    expect((await midRunChangeProblems(c.database.db, scope, changes, KINDS)).length).toBeGreaterThan(0);

    await c.client.completeRun({ runId });
    await until(
      async () => (await c.client.getRun({ runId })).run?.status === RunStatus.SUCCEEDED,
      90_000,
      "the run to cut over and succeed",
    );
    expect(await midRunChangeProblems(c.database.db, scope, changes, KINDS)).toEqual([]);
    const deleted = ["organizations", "persons", "activities", "notes", "leads"].flatMap((kind) =>
      (truth.kinds[kind as "persons"].deleted as string[]).map((id) => ({ kind, id })),
    );
    const [unmarked] = await c.database.db.execute<{ n: number }>(sql`
      select count(*)::int as n from drover.ledger
       where tenant_id = 'banned' and action in ('created', 'matched') and source_deleted_at is null
         and (kind, source_id) in (select * from jsonb_to_recordset(${JSON.stringify(deleted)}::jsonb) as d(kind text, id text))`);
    expect(unmarked!.n).toBe(0);
  }, 240_000);
});
