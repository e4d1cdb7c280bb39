import { randomBytes } from "node:crypto";
import { generateSecretKey } from "@drover/auth";
import { type Database, openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { taskQueueNames } from "@drover/task-queue";
import { createLogger } from "@drover/telemetry";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.js";
import { startWorker } from "../src/worker.js";
import { WorkerLiveness } from "../src/worker-liveness.js";

const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const logger = createLogger("worker", { level: "fatal" });
let testDb: TestDatabase;
let database: Database;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 2 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

async function record(id: string) {
  const [row] = await database.db.execute<{ alive: boolean; worker_id: string; lane_width: number }>(
    sql`select expires_at > now() as alive, worker_id, lane_width from drover.workers where id = ${id}::uuid`,
  );
  return row;
}

function liveness(workerId: string, livenessMs = 60_000) {
  return new WorkerLiveness({ databaseUrl: testDb.url, workerId, laneWidth: 3, livenessMs, logger });
}

describe("a worker's liveness record", () => {
  it("is registered at start, kept alive by heartbeats, and removed at stop", async () => {
    const l = liveness("beating", 2_000);
    await l.start();
    const id = l.record;
    expect(await record(id)).toEqual({ alive: true, worker_id: "beating", lane_width: 3 });
    // Past the first timeout: only the heartbeats (every 400 ms) keep it alive.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(l.record).toBe(id);
    expect((await record(id))?.alive).toBe(true);
    await l.stop();
    expect(await record(id)).toBeUndefined();
  });

  it("says at once that its event loop is busy while the loop is full, and idle again once it waits", async () => {
    // Heartbeats every 12 s: within the test only a change of load writes the record.
    const l = liveness("loaded");
    await l.start();
    const busy = async () =>
      (
        await database.db.execute<{ busy: boolean }>(
          sql`select busy from drover.workers where id = ${l.record}::uuid`,
        )
      )[0]?.busy;
    const until = async (want: boolean) => {
      const deadline = Date.now() + 5_000;
      while ((await busy()) !== want && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      return busy();
    };
    expect(await busy()).toBe(false);
    const spinUntil = Date.now() + 1_500;
    while (Date.now() < spinUntil) {
      // The loop does nothing else: CPU-bound work, as a worker parsing and writing pages flat out.
    }
    expect(await until(true)).toBe(true);
    expect(await until(false)).toBe(false);
    await l.stop();
  });

  it("once expired it is never revived: the worker registers again under a new record", async () => {
    const l = liveness("thawed");
    await l.start();
    const first = l.record;
    await database.db.execute(
      sql`update drover.workers set expires_at = now() - interval '1 second' where id = ${first}::uuid`,
    );
    await l.beat();
    expect(l.record).not.toBe(first);
    expect((await record(first))?.alive).toBe(false);
    expect((await record(l.record))?.alive).toBe(true);
    await l.stop();
  });

  it("a worker stopped gracefully leaves no record behind", async () => {
    const prefix = `t${randomBytes(5).toString("hex")}`;
    const worker = await startWorker(
      loadWorkerConfig({
        DATABASE_URL: testDb.url,
        NATS_URL,
        DROVER_QUEUE_PREFIX: prefix,
        DROVER_WORKER_ID: `${prefix}-w`,
        DROVER_COORDINATOR_ADDRESS: "127.0.0.1:1",
        DROVER_WORKER_TOKEN: "worker-token",
        DROVER_SECRET_KEYS: generateSecretKey("test"),
      }),
      { logger },
    );
    const nc = await connect({ servers: NATS_URL });
    try {
      const mine = sql`select count(*)::int as n from drover.workers where worker_id = ${`${prefix}-w`}`;
      expect((await database.db.execute<{ n: number }>(mine))[0]!.n).toBe(1);
      await worker.stop();
      expect((await database.db.execute<{ n: number }>(mine))[0]!.n).toBe(0);
    } finally {
      await (await jetstreamManager(nc)).streams.delete(taskQueueNames(prefix).stream).catch(() => false);
      await nc.close();
    }
  });
});
