import { randomBytes, randomUUID } from "node:crypto";
import { generateSecretKey } from "@drover/auth";
import { type Database, openDatabase, runs, tasks } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import type { Provider, RowWriter } from "@drover/provider-sdk";
import { publishTask, taskQueueNames } from "@drover/task-queue";
import { createLogger } from "@drover/telemetry";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.js";
import { startWorker, type Worker } from "../src/worker.js";

const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const prefix = `t${randomBytes(5).toString("hex")}`;
const names = taskQueueNames(prefix);
let testDb: TestDatabase;
let database: Database;
let nc: NatsConnection;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
  nc = await connect({ servers: NATS_URL });
});
afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(names.stream).catch(() => false);
  await nc.drain();
  await database.close();
  await testDb.drop();
});

const ROWS = Array.from({ length: 60 }, (_, i) => ({ sourceId: `c${i}`, data: { name: `company ${i}` } }));

const companyWriter: RowWriter<{ name: string }> = async (tx, row) => {
  const [r] = await tx.execute<{ id: string }>(sql`
    insert into app.companies (tenant_id, name) values ('t', ${row.name}) returning id`);
  return { action: "created", recordType: "company", recordId: Number(r!.id) };
};

/**
 * A task of 60 rows: it commits the first window, then fetches the rest. `stuckFetch`, when given,
 * is a fetch that ignores the abort signal (a hung socket, a provider that does not pass the signal
 * on): what a grace time exists for.
 */
function provider(stuckFetch?: () => Promise<void>): Provider {
  return {
    name: "test",
    phases: [["companies"]],
    validateConfig: () => undefined,
    seedPhase: async () => [],
    async runTask(ctx) {
      await ctx.writeRows(ROWS.slice(0, 25), companyWriter);
      await stuckFetch?.();
      await ctx.writeRows(ROWS, companyWriter);
      return {};
    },
  };
}

function worker(id: string, providers: Provider): Promise<Worker> {
  return startWorker(
    loadWorkerConfig({
      DATABASE_URL: testDb.url,
      NATS_URL,
      DROVER_QUEUE_PREFIX: prefix,
      DROVER_WORKER_ID: `${prefix}-${id}`,
      // Nobody listens there: TaskFinished is best effort, and this test needs no coordinator.
      DROVER_COORDINATOR_ADDRESS: "127.0.0.1:1",
      DROVER_WORKER_TOKEN: "worker-token",
      DROVER_SECRET_KEYS: generateSecretKey("test"),
      DROVER_SHUTDOWN_GRACE_MS: "300",
    }),
    {
      providers: new Map([["test", providers]]),
      logger: createLogger("worker", { level: "fatal" }),
    },
  );
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

async function until<T>(fn: () => Promise<T>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function taskRow(id: number) {
  const [row] = await database.db
    .select({
      status: tasks.status,
      attempts: tasks.attempts,
      processedOffset: tasks.processedOffset,
      lockedBy: tasks.lockedBy,
    })
    .from(tasks)
    .where(eq(tasks.id, id));
  return row!;
}

describe("a worker's shutdown", { timeout: 30_000 }, () => {
  it("hands back a task still running at the grace time, so it is pending at once and another worker finishes it", async () => {
    const [run] = await database.db
      .insert(runs)
      .values({
        tenantId: "t",
        source: "test",
        sourceAccount: "acct",
        kinds: ["companies"],
        plan: [["companies"]],
        status: "running",
        startedAt: new Date(),
      })
      .returning();
    const [task] = await database.db
      .insert(tasks)
      .values({ runId: run!.id, kind: "companies", phase: 0, seedKey: randomUUID(), cursor: {} })
      .returning();

    const fetchStarted = deferred();
    const hung = deferred();
    const first = provider(() => {
      fetchStarted.resolve();
      return hung.promise;
    });
    const w1 = await worker("w1", first);
    await publishTask(jetstream(nc), names, { taskId: task!.id, runId: run!.id });
    await fetchStarted.promise;
    expect(await taskRow(task!.id)).toMatchObject({ status: "running", attempts: 1, processedOffset: 25 });

    const stopping = w1.stop();
    expect(w1.stop()).toBe(stopping);
    await stopping;
    expect(w1.state).toBe("STOPPED");
    // Not after the reaper's stale threshold: now, with its committed window and no attempt spent.
    expect(await taskRow(task!.id)).toEqual({
      status: "pending",
      attempts: 0,
      processedOffset: 25,
      lockedBy: null,
    });

    const w2 = await worker("w2", provider());
    try {
      await until(async () => (await taskRow(task!.id)).status === "succeeded", "the task to succeed");
      const rows = await database.db.execute<{ name: string; n: number }>(
        sql`select name, count(*)::int as n from app.companies group by name`,
      );
      expect(rows.length).toBe(ROWS.length);
      expect(rows.filter((r) => r.n !== 1)).toEqual([]);
      expect((await taskRow(task!.id)).attempts).toBe(1);
      // Outcomes go to the onOutcome hook; a worker keeps no list that grows with every task it runs.
      expect(w2).not.toHaveProperty("outcomes");
    } finally {
      hung.resolve();
      await w2.stop();
    }
  });
});
