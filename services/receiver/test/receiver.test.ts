import { createHash, randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { type Database, openDatabase, runs } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { webhookEventNames } from "@drover/task-queue";
import { createLogger } from "@drover/telemetry";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadReceiverConfig } from "../src/config.js";
import { type RunningReceiver, startReceiver } from "../src/service.js";

/** A Pipedrive webhooks v2 delivery as its public guide shows it (the fixture's README names the source). */
const DELIVERY = JSON.parse(
  readFileSync(
    new URL(
      "../../../packages/sources/crm/test/fixtures/pipedrive/webhook-v2-deal-change.json",
      import.meta.url,
    ),
    "utf8",
  ),
) as { meta: Record<string, unknown> };

const prefix = `recv${randomBytes(4).toString("hex")}`;
const names = webhookEventNames(prefix);
let testDb: TestDatabase;
let database: Database;
let nc: NatsConnection;
let running: RunningReceiver;
const runId = randomUUID();
const password = randomBytes(32).toString("base64url");
const auth = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString("base64")}`;
const good = auth(`drover-${runId}`, password);

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 2 });
  await database.db.insert(runs).values({
    id: runId,
    tenantId: "t1",
    source: "crm",
    sourceAccount: "acct",
    kinds: ["deals"],
    plan: [["deals"]],
    sourceConfig: {},
    status: "running",
  });
  await database.db.execute(sql`
    insert into drover.run_webhooks (run_id, auth_user, secret_sha256, secret_ciphertext, secret_key_id, mode)
    values (${runId}::uuid, ${`drover-${runId}`}, ${createHash("sha256").update(password).digest("hex")}, 'x', 'k', 'webhooks')`);
  running = await startReceiver(
    loadReceiverConfig({
      DATABASE_URL: testDb.url,
      DROVER_QUEUE_PREFIX: prefix,
      DROVER_RECEIVER_HOST: "127.0.0.1",
      DROVER_RECEIVER_PORT: "0",
      DROVER_RECEIVER_MAX_BODY_BYTES: "4096",
      ...(process.env.NATS_URL ? { NATS_URL: process.env.NATS_URL } : {}),
    }),
    createLogger("test", { level: "silent" }),
  );
  nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
});

afterAll(async () => {
  await running?.stop();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(names.stream).catch(() => {});
  await nc?.close();
  await database?.close();
  await testDb?.drop();
});

async function stored(): Promise<number> {
  const jsm = await jetstreamManager(nc);
  return (await jsm.streams.info(names.stream)).state.messages;
}

function post(body: string, authorization: string | undefined = good, path = `/pipedrive/${runId}`) {
  return fetch(`${running.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
    body,
  });
}

const delivery = (id: string, over: Record<string, unknown> = {}) =>
  JSON.stringify({ ...DELIVERY, meta: { ...DELIVERY.meta, id, ...over } });

describe("the webhook receiver", () => {
  it("stores an authenticated delivery in JetStream before answering 200, and a duplicate event id once", async () => {
    const before = await stored();
    const first = await post(delivery("event-1"));
    expect(first.status).toBe(200);
    expect(await stored()).toBe(before + 1);
    // Pipedrive retries a delivery it saw fail: the same meta.id again is answered 200 and dropped.
    expect((await post(delivery("event-1", { attempt: 2 }))).status).toBe(200);
    expect(await stored()).toBe(before + 1);
    expect(running.receiver.counts.duplicates).toBe(1);
    const jsm = await jetstreamManager(nc);
    const msg = await jsm.streams.getMessage(names.stream, {
      last_by_subj: `${names.subjectPrefix}.${runId}`,
    });
    expect(msg).toBeDefined();
    expect((msg!.json() as { meta: { id: string } }).meta.id).toBe("event-1");
  });

  // The bad-input table: each row is refused with its status and stores nothing.
  const bad: [string, () => Promise<Response>, number][] = [
    ["no credentials", () => post(delivery("e-a"), ""), 401],
    ["a wrong password", () => post(delivery("e-b"), auth(`drover-${runId}`, "guess")), 401],
    ["another run's user", () => post(delivery("e-c"), auth(`drover-${randomUUID()}`, password)), 401],
    ["an unknown run", () => post(delivery("e-d"), good, `/pipedrive/${randomUUID()}`), 401],
    ["a body that is not JSON", () => post("{meta:"), 400],
    ["a JSON array", () => post("[]"), 400],
    ["no meta.id", () => post(delivery("", {})), 400],
    ["an unknown action", () => post(delivery("e-e", { action: "merged" })), 400],
    ["a v1 event", () => post(delivery("e-f", { version: "1.0" })), 400],
    ["data that is a string", () => post(JSON.stringify({ ...JSON.parse(delivery("e-g")), data: "x" })), 400],
    ["a body over the limit", () => post(delivery("e-h", { pad: "x".repeat(5000) })), 413],
    ["a GET", () => fetch(`${running.url}/pipedrive/${runId}`), 405],
    ["a path with no run", () => post(delivery("e-i"), good, "/pipedrive/not-a-run"), 404],
  ];
  for (const [what, send, status] of bad)
    it(`answers ${status} to ${what} and stores nothing`, async () => {
      const before = await stored();
      expect((await send()).status).toBe(status);
      expect(await stored()).toBe(before);
    });

  it("refuses deliveries for a run whose webhooks were removed", async () => {
    const other = randomUUID();
    await database.db.insert(runs).values({
      id: other,
      tenantId: "t2",
      source: "crm",
      sourceAccount: "acct",
      kinds: ["deals"],
      plan: [["deals"]],
      sourceConfig: {},
      status: "succeeded",
    });
    await database.db.execute(sql`
      insert into drover.run_webhooks (run_id, auth_user, secret_sha256, secret_ciphertext, secret_key_id, mode, removed_at)
      values (${other}::uuid, 'u', ${createHash("sha256").update("p").digest("hex")}, 'x', 'k', 'removed', now())`);
    const before = await stored();
    expect((await post(delivery("e-j"), auth("u", "p"), `/pipedrive/${other}`)).status).toBe(401);
    expect(await stored()).toBe(before);
  });
});
