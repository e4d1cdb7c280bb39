import { randomBytes, randomUUID } from "node:crypto";
import { type Database, openDatabase, runs } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import {
  ensureWebhookEventStream,
  publishWebhookEvent,
  type WebhookEventNames,
  webhookEventNames,
} from "@drover/task-queue";
import { type JetStreamClient, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FollowEvents } from "../src/follow-events.js";
import { testContext } from "./test-context.js";

/**
 * The leader's side of the webhook feed: stored events become re-read tasks on the follow run's
 * closing phase and are acknowledged after; a run still importing keeps its events for later; a
 * run that no longer follows lets them go; a leader that could not seed them leaves them to the
 * next pass (or the next leader), which seeds them once.
 */
let testDb: TestDatabase;
let database: Database;
let nc: NatsConnection;
let js: JetStreamClient;
let names: WebhookEventNames;
let dispatched = 0;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
  nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
  js = jetstream(nc);
  names = webhookEventNames(`fe${randomBytes(4).toString("hex")}`);
  await ensureWebhookEventStream(await jetstreamManager(nc), names);
});

afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(names.stream).catch(() => false);
  await nc?.close();
  await database?.close();
  await testDb?.drop();
});

const PLAN = [["organizations", "persons"], ["deals"], ["catch-up"]];

async function followRun(state: { phase: number; passes: number; cutover?: boolean }): Promise<string> {
  const id = randomUUID();
  const at = new Date().toISOString();
  await database.db.insert(runs).values({
    id,
    tenantId: `t-${id.slice(0, 8)}`,
    source: "crm",
    sourceAccount: "acct",
    kinds: PLAN.flat(),
    plan: PLAN,
    sourceConfig: {},
    status: "running",
    currentPhase: state.phase,
    follow: {
      intervalSeconds: 300,
      cutoverAt: state.cutover ? at : null,
      passes: Array.from({ length: state.passes }, (_, index) => ({
        index,
        since: at,
        seededAt: at,
        startsAt: at,
        finishedAt: index === state.passes - 1 ? null : at,
        changes: null,
      })),
      feed: { mode: "webhooks", reason: null, reconcileSeconds: 3600, lastEventAt: null },
    },
  });
  return id;
}

let eventNo = 0;
async function event(runId: string, entity: string, entityId: string): Promise<void> {
  const id = `ev-${++eventNo}`;
  const body = JSON.stringify({
    meta: {
      id,
      action: "change",
      entity,
      entity_id: entityId,
      version: "2.0",
      timestamp: new Date().toISOString(),
    },
    data: { id: entityId },
    previous: null,
  });
  await publishWebhookEvent(js, names, runId, id, body);
}

async function stored(): Promise<number> {
  return (await (await jetstreamManager(nc)).streams.info(names.stream)).state.messages;
}

async function eventTasks(runId: string) {
  return database.db.execute<{
    kind: string;
    phase: number;
    cursor: { redrive: string[]; events: boolean };
  }>(sql`
    select kind, phase, cursor from drover.tasks where run_id = ${runId}::uuid order by kind`);
}

const ctx = () =>
  testContext(database.db, {}, async () => {
    dispatched++;
    return 0;
  });

describe("webhook events on the leader", () => {
  it("seeds one re-read per kind on the closing phase, ids deduplicated, and acknowledges the events", async () => {
    const runId = await followRun({ phase: 2, passes: 2 });
    await event(runId, "deal", "7");
    await event(runId, "deal", "7");
    await event(runId, "deal", "9");
    await event(runId, "person", "3");
    await event(runId, "product", "1"); // an object no run imports
    const before = dispatched;
    const pass = await new FollowEvents(ctx(), js, names).pass();
    expect(pass).toMatchObject({ taken: 5, dropped: 1, seeded: 2 });
    expect(dispatched).toBe(before + 1);
    const tasks = await eventTasks(runId);
    expect(tasks.map((t) => [t.kind, t.phase, [...t.cursor.redrive].sort(), t.cursor.events])).toEqual([
      ["deals", 2, ["7", "9"], true],
      ["persons", 2, ["3"], true],
    ]);
    expect(await stored()).toBe(0);
    const [row] = await database.db.execute<{ last: string | null }>(sql`
      select follow #>> '{feed,lastEventAt}' as last from drover.runs where id = ${runId}::uuid`);
    expect(row?.last).not.toBeNull();
  });

  it("keeps a run's events while it imports, and lets a cut-over run's go", async () => {
    const importing = await followRun({ phase: 1, passes: 0 });
    const cutOver = await followRun({ phase: 2, passes: 2, cutover: true });
    await event(importing, "deal", "1");
    await event(cutOver, "deal", "2");
    const pass = await new FollowEvents(ctx(), js, names).pass();
    expect(pass).toMatchObject({ taken: 2, deferred: 1, dropped: 1, seeded: 0 });
    expect(await eventTasks(importing)).toEqual([]);
    expect(await eventTasks(cutOver)).toEqual([]);
    // Still stored, back after its delay.
    expect(await stored()).toBe(1);
  });

  it("leaves events it could not seed to the next pass, which seeds them once", async () => {
    const runId = await followRun({ phase: 2, passes: 2 });
    await event(runId, "organization", "5");
    // A leader whose database is gone: the seeding fails, nothing is acknowledged.
    const broken = openDatabase(testDb.url, { max: 1 });
    await broken.close();
    const failing = await new FollowEvents(testContext(broken.db), js, names).pass();
    expect(failing.taken).toBeGreaterThanOrEqual(1);
    expect(failing.seeded).toBe(0);
    expect(await eventTasks(runId)).toEqual([]);
    // The next leader (another instance) takes them once their nak delay ran out.
    let seeded = 0;
    const deadline = Date.now() + 15_000;
    while (seeded === 0 && Date.now() < deadline)
      seeded += (await new FollowEvents(ctx(), js, names).pass()).seeded;
    expect(seeded).toBe(1);
    expect((await eventTasks(runId)).map((t) => t.cursor.redrive)).toEqual([["5"]]);
  });
});
