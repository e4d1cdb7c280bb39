import { randomUUID } from "node:crypto";
import { type Database, openDatabase, runs, tasks } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import type { AssignmentOutcome } from "@drover/engine";
import {
  PermanentError,
  type Provider,
  RateLimitedError,
  type RowWriter,
  type TaskContext,
  TransientError,
} from "@drover/provider-sdk";
import { createLogger } from "@drover/telemetry";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeldTasks } from "../src/held-tasks.js";
import { type FinishedTask, type TaskMessage, taskMessageHandler } from "../src/task-message.js";

let testDb: TestDatabase;
let database: Database;
beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

/** What the handler told the broker, in order. */
type Verb = ["ack"] | ["nak", number | undefined] | ["term", string | undefined];

function fakeMessage(payload: unknown): TaskMessage & { verbs: Verb[] } {
  const verbs: Verb[] = [];
  return {
    data: new TextEncoder().encode(typeof payload === "string" ? payload : JSON.stringify(payload)),
    verbs,
    ack: () => verbs.push(["ack"]),
    nak: (delayMs) => verbs.push(["nak", delayMs]),
    term: (reason) => verbs.push(["term", reason]),
    working: () => {},
  };
}

/** Two windows (25 rows each): a stop or a shutdown is noticed between them. */
const twoWindows = (prefix: string) =>
  Array.from({ length: 30 }, (_, i) => ({ sourceId: `${prefix}${i}`, data: { name: `${prefix}${i}` } }));

const companyWriter: RowWriter<{ name: string }> = async (tx, row) => {
  const [r] = await tx.execute<{ id: string }>(sql`
    insert into app.companies (tenant_id, name) values ('t', ${row.name}) returning id`);
  return { action: "created", recordType: "company", recordId: Number(r!.id) };
};

type Behaviour = (ctx: TaskContext, shutdown: AbortController) => Promise<void>;

/** The test source: each task does what its cursor's `does` names. */
const behaviours: Record<string, Behaviour> = {
  succeed: async (ctx) => {
    await ctx.writeRows([{ sourceId: "1", data: { name: "one" } }], companyWriter);
  },
  "fail-permanently": async () => {
    throw new PermanentError("the source refused the request (403)");
  },
  "fail-transiently": async () => {
    throw new TransientError("the source timed out");
  },
  "hit-the-rate-limit": async () => {
    throw new RateLimitedError("rate limited (429)", new Date(Date.now() + 60_000));
  },
  "be-stopped": async (ctx) => {
    await database.db.update(runs).set({ status: "stopping" }).where(eq(runs.id, ctx.run.id));
    await ctx.writeRows(twoWindows("stopped-"), companyWriter);
  },
  "be-shut-down": async (ctx, shutdown) => {
    shutdown.abort(new Error("worker shutting down"));
    await ctx.writeRows(twoWindows("shut-down-"), companyWriter);
  },
  "lose-the-claim": async (ctx) => {
    await database.db.execute(sql`
      update drover.tasks set status = 'pending', locked_by = null, locked_at = null where id = ${ctx.task.id}`);
    await ctx.writeRows([{ sourceId: "4", data: { name: "four" } }], companyWriter);
  },
};

async function insertTask(does: string, status: "pending" | "succeeded" = "pending") {
  const [run] = await database.db
    .insert(runs)
    .values({
      tenantId: `tenant-${randomUUID().slice(0, 8)}`,
      source: "test",
      sourceAccount: `acct-${does}`,
      kinds: ["companies"],
      plan: [["companies"]],
      status: "running",
      startedAt: new Date(),
    })
    .returning();
  const [task] = await database.db
    .insert(tasks)
    .values({ runId: run!.id, kind: "companies", phase: 0, seedKey: randomUUID(), cursor: { does }, status })
    .returning();
  return task!;
}

async function handleOne(
  does: string,
  options: { underPressure?: boolean; status?: "pending" | "succeeded"; payload?: unknown } = {},
) {
  const task = await insertTask(does, options.status);
  const shutdown = new AbortController();
  const provider: Provider = {
    name: "test",
    phases: [["companies"]],
    validateConfig: () => undefined,
    seedPhase: async () => [],
    async runTask(ctx) {
      await behaviours[String(ctx.task.cursor.does)]!(ctx, shutdown);
      return {};
    },
  };
  const reported: FinishedTask[] = [];
  const outcomes: AssignmentOutcome[] = [];
  const held = new HeldTasks();
  const handle = taskMessageHandler({
    runner: {
      db: database.db,
      providers: new Map([["test", provider]]),
      workerId: "w",
      maxAttempts: 3,
      notesCap: 100,
      stopPollMs: 0,
    },
    pressure: { underPressure: async () => options.underPressure ?? false, lastValue: 0.5 },
    pressureDeferMs: 4_321,
    shutdown: shutdown.signal,
    held,
    reportFinished: async (t) => reported.push(t),
    logger: createLogger("worker", { level: "fatal" }),
    onOutcome: (o) => outcomes.push(o),
  });
  const msg = fakeMessage(options.payload ?? { taskId: task.id, runId: task.runId });
  await handle(msg);
  const [row] = await database.db
    .select({ status: tasks.status, attempts: tasks.attempts })
    .from(tasks)
    .where(eq(tasks.id, task.id));
  return { task, msg, reported, outcomes, row: row!, held };
}

describe("a task message", () => {
  it("that is not an assignment is terminated, and no task is touched", async () => {
    const { msg, reported, outcomes, row } = await handleOne("succeed", { payload: "{garbled" });
    expect(msg.verbs).toEqual([["term", "not a task assignment"]]);
    expect(reported).toEqual([]);
    expect(outcomes).toEqual([]);
    expect(row).toEqual({ status: "pending", attempts: 0 });
  });

  it("under database pressure is nak'd with the deferral delay before anything is claimed", async () => {
    const { msg, reported, row } = await handleOne("succeed", { underPressure: true });
    expect(msg.verbs).toEqual([["nak", 4_321]]);
    expect(reported).toEqual([]);
    expect(row).toEqual({ status: "pending", attempts: 0 });
  });

  it("of a task that succeeds is acked and reported to the coordinator", async () => {
    const { task, msg, reported, outcomes, row, held } = await handleOne("succeed");
    expect(msg.verbs).toEqual([["ack"]]);
    expect(reported).toEqual([{ taskId: task.id, runId: task.runId, outcome: "succeeded", phase: 0 }]);
    expect(outcomes.map((o) => o.status)).toEqual(["succeeded"]);
    expect(row.status).toBe("succeeded");
    expect(held.size).toBe(0);
  });

  it("of a task that fails for good is acked and reported", async () => {
    const { task, msg, reported, row } = await handleOne("fail-permanently");
    expect(msg.verbs).toEqual([["ack"]]);
    expect(reported).toEqual([{ taskId: task.id, runId: task.runId, outcome: "failed", phase: 0 }]);
    expect(row).toEqual({ status: "failed", attempts: 1 });
  });

  it("of a task stopped with its run is acked and reported as cancelled", async () => {
    const { task, msg, reported, row } = await handleOne("be-stopped");
    expect(msg.verbs).toEqual([["ack"]]);
    expect(reported).toEqual([{ taskId: task.id, runId: task.runId, outcome: "cancelled", phase: 0 }]);
    expect(row.status).toBe("cancelled");
  });

  it("of a task released for a retry is acked, not reported: the dispatcher publishes it when it is due", async () => {
    const { msg, reported, outcomes, row } = await handleOne("fail-transiently");
    expect(msg.verbs).toEqual([["ack"]]);
    expect(reported).toEqual([]);
    expect(outcomes.map((o) => o.status)).toEqual(["released"]);
    expect(row).toEqual({ status: "pending", attempts: 1 });
  });

  it("of a task parked behind the rate limit is acked, not reported, and spends no attempt", async () => {
    const { msg, reported, outcomes, row } = await handleOne("hit-the-rate-limit");
    expect(msg.verbs).toEqual([["ack"]]);
    expect(reported).toEqual([]);
    expect(outcomes.map((o) => o.status)).toEqual(["parked"]);
    expect(row).toEqual({ status: "pending", attempts: 0 });
  });

  it("of a task handed back at shutdown is nak'd without delay for another worker at once", async () => {
    const { msg, reported, outcomes, row, held } = await handleOne("be-shut-down");
    expect(msg.verbs).toEqual([["nak", undefined]]);
    expect(reported).toEqual([]);
    expect(outcomes.map((o) => o.status)).toEqual(["handed_back"]);
    expect(row).toEqual({ status: "pending", attempts: 0 });
    expect(held.size).toBe(0);
  });

  it("of a task whose claim was lost is acked and not reported: the new owner settles it", async () => {
    const { msg, reported, outcomes, row } = await handleOne("lose-the-claim");
    expect(msg.verbs).toEqual([["ack"]]);
    expect(reported).toEqual([]);
    expect(outcomes.map((o) => o.status)).toEqual(["lost"]);
    expect(row.status).toBe("pending");
  });

  it("of a task that is no longer pending is acked and dropped", async () => {
    const { msg, reported, outcomes } = await handleOne("succeed", { status: "succeeded" });
    expect(msg.verbs).toEqual([["ack"]]);
    expect(reported).toEqual([]);
    expect(outcomes).toEqual([{ status: "dropped", reason: "task is succeeded" }]);
  });
});
