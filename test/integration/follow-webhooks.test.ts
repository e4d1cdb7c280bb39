import { RunStatus } from "@drover/proto";
import type { RunningReceiver } from "@drover/receiver";
import { webhookEventNames } from "@drover/task-queue";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/free-port.js";
import { API_TOKEN, type Cluster, SETTINGS, startCluster, until } from "../support/in-process.js";
import { startTestReceiver } from "../support/receiver.js";

/**
 * A follow run and Pipedrive's webhooks, against the sandbox (which sends them as Pipedrive's
 * guide describes) and the receiver: the run registers one webhook per kind when it starts
 * following, the source's changes reach the event stream through the receiver, and cutover
 * removes the webhooks (the receiver then refuses the run's deliveries).
 */
const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
let c: Cluster;
let receiver: RunningReceiver;

beforeAll(async () => {
  const port = await freePort();
  c = await startCluster({
    workers: 0,
    sandbox: { changeEdits: 2, changeAdds: 1, changeDeletes: 1 },
    coordinatorEnv: { DROVER_WEBHOOK_PUBLIC_URL: `http://127.0.0.1:${port}` },
  });
  receiver = await startTestReceiver({
    databaseUrl: c.testDb.url,
    queuePrefix: c.prefix,
    port: port,
    logLevel: "silent",
  });
});

afterAll(async () => {
  await receiver?.stop();
  await c?.close();
});

async function sandboxWebhooks(): Promise<{ event_object: string; subscription_url: string }[]> {
  const res = await fetch(`${c.sandbox.url}/v1/webhooks`, { headers: { "x-api-token": API_TOKEN } });
  return ((await res.json()) as { data: { event_object: string; subscription_url: string }[] }).data;
}

async function storedEvents(): Promise<number> {
  const nc = await connect({ servers: NATS_URL });
  try {
    return (await (await jetstreamManager(nc)).streams.info(webhookEventNames(c.prefix).stream)).state
      .messages;
  } finally {
    await nc.close();
  }
}

describe("a follow run with webhooks", () => {
  it("registers a webhook per kind, receives the source's changes, and removes them at cutover", async () => {
    const { run } = await c.client.startRun({
      tenantId: "hooks",
      source: "crm",
      sourceAccount: "acct",
      kinds: [],
      sourceConfig: { baseUrl: c.sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
      follow: true,
    });
    const runId = run!.id;
    const mode = async () =>
      (
        await c.database.db.execute<{ mode: string; reason: string | null; removed_at: Date | null }>(sql`
          select mode, reason, removed_at from drover.run_webhooks where run_id = ${runId}::uuid`)
      )[0];
    await until(async () => (await mode())?.mode === "webhooks", 20_000, "webhooks registered");
    const hooks = await sandboxWebhooks();
    expect(hooks.map((h) => h.event_object).sort()).toEqual(
      ["activity", "deal", "lead", "note", "organization", "person"].sort(),
    );
    expect(new Set(hooks.map((h) => h.subscription_url))).toEqual(
      new Set([`${new URL(hooks[0]!.subscription_url).origin}/pipedrive/${runId}`]),
    );

    const shown = (await c.client.getRun({ runId })).run?.follow;
    expect(shown).toMatchObject({ feed: "webhooks", feedReason: "", reconcileSeconds: 3600 });

    // A round of changes: 2 edits, 1 add, 1 delete per kind, each delivered once and stored once.
    c.sandbox.applyChanges();
    await until(async () => (await storedEvents()) === 24, 20_000, "24 events stored");
    expect(c.sandbox.webhookStats()).toMatchObject({ delivered: 24, failedAttempts: 0, lost: 0 });

    await c.client.completeRun({ runId });
    await until(async () => (await mode())?.mode === "removed", 20_000, "webhooks removed");
    expect(await sandboxWebhooks()).toHaveLength(0);
    expect((await mode())?.removed_at).not.toBeNull();
  });

  it("removes its webhooks when stopped and registers them again, same credential, when resumed", async () => {
    const { run } = await c.client.startRun({
      tenantId: "hooks-stop",
      source: "crm",
      sourceAccount: "acct",
      kinds: ["deals"],
      sourceConfig: { baseUrl: c.sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
      follow: true,
    });
    const runId = run!.id;
    const row = async () =>
      (
        await c.database.db.execute<{ mode: string; secret_sha256: string; webhook_ids: string[] }>(sql`
          select mode, secret_sha256, webhook_ids from drover.run_webhooks where run_id = ${runId}::uuid`)
      )[0];
    await until(async () => (await row())?.mode === "webhooks", 20_000, "webhooks registered");
    const before = await row();
    expect(await sandboxWebhooks()).toHaveLength(1);

    await c.client.stopRun({ runId });
    await until(async () => (await row())?.mode === "removed", 20_000, "webhooks removed");
    expect(await sandboxWebhooks()).toHaveLength(0);
    expect((await c.client.getRun({ runId })).run?.follow?.feed).toBe("polling");
    await until(
      async () => (await c.client.getRun({ runId })).run?.status === RunStatus.STOPPED,
      20_000,
      "stopped",
    );

    await c.client.resumeRun({ runId });
    await until(async () => (await row())?.mode === "webhooks", 20_000, "webhooks registered again");
    const after = await row();
    expect(after!.secret_sha256).toBe(before!.secret_sha256);
    expect(after!.webhook_ids).not.toEqual(before!.webhook_ids);
    expect((await sandboxWebhooks()).map((h) => h.event_object)).toEqual(["deal"]);
    expect((await c.client.getRun({ runId })).run?.follow?.feed).toBe("webhooks");
    await c.client.completeRun({ runId });
    await until(async () => (await row())?.mode === "removed", 20_000, "webhooks removed at cutover");
  });

  it("follows by polling, and says why, when its source refuses the webhooks", async () => {
    // Another tenant's run on an account whose token the sandbox refuses: the import would fail,
    // but the registration is refused first and the run is marked to poll with the reason.
    const { run } = await c.client.startRun({
      tenantId: "hooks-refused",
      source: "crm",
      sourceAccount: "acct2",
      kinds: [],
      sourceConfig: { baseUrl: `${c.sandbox.url}/nowhere`, apiToken: API_TOKEN, settings: SETTINGS },
      follow: true,
    });
    const row = await until(
      async () =>
        (
          await c.database.db.execute<{ mode: string; reason: string | null }>(sql`
            select mode, reason from drover.run_webhooks where run_id = ${run!.id}::uuid and mode = 'polling'`)
        )[0],
      20_000,
      "run polling",
    );
    expect(row.reason).toMatch(/Pipedrive refused the \w+ webhook \(HTTP 404/);
    const shown = (await c.client.getRun({ runId: run!.id })).run?.follow;
    expect(shown?.feed).toBe("polling");
    expect(shown?.feedReason).toBe(row.reason);
    await c.client.stopRun({ runId: run!.id });
  });
});
