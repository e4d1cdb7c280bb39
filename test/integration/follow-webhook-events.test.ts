import { RunStatus } from "@drover/proto";
import type { RunningReceiver } from "@drover/receiver";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/free-port.js";
import { API_TOKEN, type Cluster, SETTINGS, startCluster, until } from "../support/in-process.js";
import { midRunChangeProblems } from "../support/mid-run-changes.js";
import { startTestReceiver } from "../support/receiver.js";

/**
 * A follow run whose passes are an hour apart takes the source's changes from its webhooks within
 * seconds: edits and additions reach the product through the ledger as a catch-up writes them,
 * deletions are applied as the sweep applies them, and no pass ran meanwhile. Cutover still ends
 * with a reconciling pass and the run succeeds.
 */
const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"];
let c: Cluster;
let receiver: RunningReceiver;

beforeAll(async () => {
  const port = await freePort();
  c = await startCluster({
    workers: 2,
    sandbox: { changeEdits: 3, changeAdds: 2, changeDeletes: 1, mailPerDealMax: 0 },
    coordinatorEnv: {
      DROVER_WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${port}`,
      DROVER_REAPER_INTERVAL_MS: "200",
    },
  });
  receiver = await startTestReceiver({
    databaseUrl: c.testDb.url,
    queuePrefix: c.prefix,
    port: port,
    logLevel: "silent",
  });
}, 60_000);

afterAll(async () => {
  await receiver?.stop();
  await c?.close();
});

describe("a follow run fed by webhooks", () => {
  it("applies the source's edits, additions and deletions within seconds, between passes an hour apart", async () => {
    const { run } = await c.client.startRun({
      tenantId: "events",
      source: "crm",
      sourceAccount: "acct",
      kinds: [],
      sourceConfig: { baseUrl: c.sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
      // The default interval (300 s): with webhooks, passes are the hourly reconcile instead.
      follow: true,
    });
    const runId = run!.id;
    const follow = async () =>
      (
        await c.database.db.execute<{ follow: { passes: { finishedAt: string | null }[] } }>(sql`
          select follow from drover.runs where id = ${runId}::uuid`)
      )[0]!.follow;
    // The import and its own catch-up (pass 0) are done; pass 1 waits an hour.
    await until(async () => (await follow()).passes[0]?.finishedAt, 90_000, "the import to finish");
    await until(
      async () =>
        (
          await c.database.db.execute<{ mode: string }>(sql`
            select mode from drover.run_webhooks where run_id = ${runId}::uuid`)
        )[0]?.mode === "webhooks",
      20_000,
      "webhooks registered",
    );

    const passes = (
      await c.database.db.execute<{ follow: { passes: { startsAt: string }[] } }>(sql`
        select follow from drover.runs where id = ${runId}::uuid`)
    )[0]!.follow.passes;
    expect(Date.parse(passes[1]!.startsAt) - Date.parse(passes[0]!.startsAt)).toBeGreaterThanOrEqual(
      3_600_000,
    );

    const changedAt = Date.now();
    c.sandbox.applyChanges();
    const truth = c.sandbox.truth();
    const changes = truth.kinds as unknown as Parameters<typeof midRunChangeProblems>[2];
    const scope = { tenantId: "events", sourceAccount: "acct" };
    await until(
      async () => (await midRunChangeProblems(c.database.db, scope, changes, KINDS)).length === 0,
      30_000,
      "the edits and additions to reach the product",
    );
    const seconds = (Date.now() - changedAt) / 1000;
    expect(seconds).toBeLessThan(20);
    // No pass ran: the changes came from the events alone.
    expect((await follow()).passes).toHaveLength(2);
    expect((await follow()).passes[1]!.finishedAt).toBeNull();

    // Rows a round deleted (every kind but deals, which stay listed) are marked deleted at the source.
    const deleted = ["organizations", "persons", "activities", "notes", "leads"].flatMap((kind) =>
      (truth.kinds[kind as "persons"].deleted as string[]).map((id) => ({ kind, id })),
    );
    expect(deleted.length).toBeGreaterThan(0);
    await until(
      async () => {
        const rows = await c.database.db.execute<{ n: number }>(sql`
          select count(*)::int as n from drover.ledger
           where tenant_id = 'events' and source_deleted_at is not null
             and (kind, source_id) in (select * from jsonb_to_recordset(${JSON.stringify(deleted)}::jsonb) as d(kind text, id text))`);
        const held = await c.database.db.execute<{ n: number }>(sql`
          select count(*)::int as n from drover.ledger
           where tenant_id = 'events' and action in ('created', 'matched')
             and (kind, source_id) in (select * from jsonb_to_recordset(${JSON.stringify(deleted)}::jsonb) as d(kind text, id text))`);
        return rows[0]!.n > 0 && rows[0]!.n === held[0]!.n;
      },
      30_000,
      "the deletions to be applied",
    );

    await c.client.completeRun({ runId });
    await until(
      async () => (await c.client.getRun({ runId })).run?.status === RunStatus.SUCCEEDED,
      60_000,
      "the run to cut over and succeed",
    );
  }, 240_000);
});
