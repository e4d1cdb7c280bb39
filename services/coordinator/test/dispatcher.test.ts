import { randomBytes, randomUUID } from "node:crypto";
import { openDatabase, runs, tasks } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { dispatchLock, handOnSlot, heartbeatWorker, registerWorker, runSlice } from "@drover/engine";
import { ensureTaskQueue, parseAssignment, type TaskAssignment, taskQueueNames } from "@drover/task-queue";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { coalescedDispatch, type DispatcherDeps, dispatch, type FairShareMode } from "../src/dispatcher.js";

const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const names = taskQueueNames(`disp${randomBytes(4).toString("hex")}`);
let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
let nc: NatsConnection;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
  nc = await connect({ servers: NATS_URL });
  await ensureTaskQueue(await jetstreamManager(nc), names);
});
afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(names.stream).catch(() => false);
  await nc.drain();
  await database.close();
  await testDb.drop();
});
beforeEach(async () => {
  // Each case starts from an empty pool, no live run and an empty queue.
  await database.db.execute(sql`delete from drover.workers`);
  await database.db.execute(sql`update drover.runs set status = 'succeeded' where status = 'running'`);
  await (await jetstreamManager(nc)).streams.purge(names.stream);
});

function deps(tenantCap = 0, fairShare: FairShareMode = "adaptive", slices = 1): DispatcherDeps {
  return {
    db: database.db,
    js: jetstream(nc),
    names,
    laneWidth: 4,
    tenantCap,
    fairShare,
    slices,
    ensureQueue: () => jetstreamManager(nc).then((jsm) => ensureTaskQueue(jsm, names)),
  };
}

async function liveWorkers(n: number, busy = false): Promise<void> {
  for (let i = 0; i < n; i++) {
    const id = randomUUID();
    await registerWorker(database.db, { id, workerId: `w${i}`, laneWidth: 4, livenessMs: 60_000 });
    // As the worker's heartbeat says it (event-loop-load.ts).
    if (busy) await heartbeatWorker(database.db, id, 60_000, true);
  }
}

async function runWithTasks(tenantId: string, count: number): Promise<string> {
  const [r] = await database.db
    .insert(runs)
    .values({
      tenantId,
      source: "crm",
      sourceAccount: `acct-${randomUUID()}`,
      kinds: ["organizations"],
      plan: [["organizations"]],
      status: "running",
    })
    .returning();
  await database.db.insert(tasks).values(
    Array.from({ length: count }, () => ({
      runId: r!.id,
      kind: "organizations",
      phase: 0,
      seedKey: randomUUID(),
      cursor: {},
    })),
  );
  return r!.id;
}

/** The messages in the work queue, in the order workers would pull them. */
async function queued(): Promise<TaskAssignment[]> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(names.stream);
  const out: TaskAssignment[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
    const msg = await jsm.streams.getMessage(names.stream, { seq }).catch(() => undefined);
    const a = msg && parseAssignment(msg.data);
    if (a && "taskId" in a) out.push(a);
  }
  return out;
}

function byRun(list: TaskAssignment[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of list) counts[a.runId] = (counts[a.runId] ?? 0) + 1;
  return counts;
}

describe("fair dispatch", () => {
  it("a small run beside a large one gets what it needs, published between the large run's tasks", async () => {
    await liveWorkers(2);
    const large = await runWithTasks("big-tenant", 200);
    const small = await runWithTasks("small-tenant", 2);
    expect(await dispatch(deps())).toBe(8);
    const order = await queued();
    expect(byRun(order)).toEqual({ [large]: 6, [small]: 2 });
    // Round-robin: the small run's two tasks are among the first four in the queue, not behind 6.
    expect(order.slice(0, 4).filter((a) => a.runId === small)).toHaveLength(2);
    // Nothing more while nothing ended: the pool is full.
    expect(await dispatch(deps())).toBe(0);
  });

  it("equal runs get equal shares of the live slots, growing with the pool", async () => {
    await liveWorkers(1);
    const ids = [await runWithTasks("t1", 50), await runWithTasks("t2", 50)];
    await dispatch(deps());
    expect(byRun(await queued())).toEqual({ [ids[0]!]: 2, [ids[1]!]: 2 });
    await liveWorkers(2);
    await dispatch(deps());
    // 3 workers × 4 slots, shared equally.
    expect(byRun(await queued())).toEqual({ [ids[0]!]: 6, [ids[1]!]: 6 });
  });

  it("a tenant's runs together stay within the tenant cap", async () => {
    await liveWorkers(4);
    const a1 = await runWithTasks("capped", 50);
    const a2 = await runWithTasks("capped", 50);
    const b = await runWithTasks("other", 50);
    await dispatch(deps(5));
    const counts = byRun(await queued());
    expect(counts[a1]! + counts[a2]!).toBe(5);
    expect(counts[b]).toBe(5);
  });

  it("requests made while a round runs share the next round: a burst publishes each task once", async () => {
    await liveWorkers(1);
    const id = await runWithTasks("bursty", 50);
    const request = coalescedDispatch(deps());
    const results = await Promise.all(Array.from({ length: 6 }, () => request()));
    // The first round fills the pool (4 slots); the five others joined one round after it.
    expect(results[0]).toBe(4);
    expect(new Set(results.slice(1))).toEqual(new Set([0]));
    expect(byRun(await queued())).toEqual({ [id]: 4 });
  });

  it("a task that ends hands its slot to its own run's next task, never beyond the run's share", async () => {
    await liveWorkers(1);
    const a = await runWithTasks("hand-a", 20);
    const b = await runWithTasks("hand-b", 20);
    await dispatch(deps());
    // Shares of 2 each, both in flight. One of a's tasks ends: its slot goes to a's next task.
    const [ended] = await database.db.execute<{ id: string }>(sql`
      update drover.tasks set status = 'succeeded' where id = (
        select min(id) from drover.tasks where run_id = ${a}::uuid and dispatched_at is not null) returning id`);
    expect(ended).toBeDefined();
    expect((await handOnSlot(database.db, a)).ids).toHaveLength(1);
    // Nothing ended since: a is at its share, and b's slot is not a's to take.
    expect((await handOnSlot(database.db, a)).ids).toHaveLength(0);
    expect((await handOnSlot(database.db, b)).ids).toHaveLength(0);
  });

  it("while a live worker is busy, a large run gets its equal share beside a small one and the rest stays free", async () => {
    await liveWorkers(1);
    await liveWorkers(1, true);
    const large = await runWithTasks("busy-large", 200);
    const small = await runWithTasks("busy-small", 1);
    expect(await dispatch(deps())).toBe(5);
    expect(byRun(await queued())).toEqual({ [large]: 4, [small]: 1 });
    // Tasks of a run above half the pool give their slots up between windows (overFairShare).
    const ceilings = await database.db.execute<{ share_ceiling: number | null }>(
      sql`select share_ceiling from drover.runs where id in (${large}::uuid, ${small}::uuid)`,
    );
    expect(ceilings.map((r) => r.share_ceiling)).toEqual([4, 4]);
    // The small run's task ends and its next page is not yet due: its share is still its own.
    await database.db.execute(sql`
      update drover.tasks set status = 'succeeded', finished_at = now() where run_id = ${small}::uuid`);
    await database.db.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor, available_at)
      values (${small}::uuid, 'organizations', 0, 'next-page', '{}', now() + interval '2 seconds')`);
    expect(await dispatch(deps())).toBe(0);
  });

  it("while a live worker is busy, a run parked until later holds no share", async () => {
    await liveWorkers(2, true);
    const large = await runWithTasks("parked-beside", 200);
    const parked = await runWithTasks("parked", 1);
    await database.db.execute(sql`
      update drover.tasks set available_at = now() + interval '1 hour' where run_id = ${parked}::uuid`);
    await database.db.execute(
      sql`update drover.runs set updated_at = now() - interval '1 minute' where id = ${parked}::uuid`,
    );
    await dispatch(deps());
    expect(byRun(await queued())).toEqual({ [large]: 8 });
  });

  it("with idle workers, or when told to lend, a run's unused share goes to the others; told to reserve, it stays free", async () => {
    await liveWorkers(2);
    const large = await runWithTasks("idle-large", 200);
    const small = await runWithTasks("idle-small", 1);
    await dispatch(deps(0, "reserve"));
    expect(byRun(await queued())).toEqual({ [large]: 4, [small]: 1 });
    await dispatch(deps());
    expect(byRun(await queued())).toEqual({ [large]: 7, [small]: 1 });
    const [lent] = await database.db.execute<{ share_ceiling: number | null }>(
      sql`select share_ceiling from drover.runs where id = ${large}::uuid`,
    );
    expect(lent!.share_ceiling).toBeNull();
    await database.db.execute(sql`update drover.workers set busy = true`);
    await (await jetstreamManager(nc)).streams.purge(names.stream);
    await database.db.execute(sql`update drover.tasks set dispatched_at = null`);
    await dispatch(deps(0, "lend"));
    expect(byRun(await queued())).toEqual({ [large]: 7, [small]: 1 });
  });
});

describe("dispatch slices", () => {
  /** Tenants whose runs fall in each of `count` slices, `perSlice` of each. */
  async function tenantsBySlice(count: number, perSlice: number): Promise<string[][]> {
    const bySlice: string[][] = Array.from({ length: count }, () => []);
    for (let i = 0; bySlice.some((s) => s.length < perSlice); i++) {
      const tenant = `slice-tenant-${i}`;
      const [row] = await database.db.execute<{ slice: number }>(
        sql`select mod(hashtext(${tenant})::bigint + 2147483648, ${count})::int as slice`,
      );
      const list = bySlice[row!.slice]!;
      if (list.length < perSlice) list.push(tenant);
    }
    return bySlice;
  }

  it("four slices together deal the pool out as one round would: an equal share to every run", async () => {
    await liveWorkers(2);
    const tenants = (await tenantsBySlice(4, 2)).flat();
    const ids = [];
    for (const t of tenants) ids.push(await runWithTasks(t, 20));
    expect(await coalescedDispatch(deps(0, "adaptive", 4))()).toBe(8);
    expect(byRun(await queued())).toEqual(Object.fromEntries(ids.map((id) => [id, 1])));
  });

  it("a run alone in its slice gets the whole idle pool", async () => {
    await liveWorkers(2);
    const tenant = (await tenantsBySlice(4, 1))[0]![0];
    const id = await runWithTasks(tenant!, 50);
    expect(await runSlice(database.db, id, 4)).toBe(0);
    expect(await coalescedDispatch(deps(0, "adaptive", 4))(id)).toBe(8);
  });

  it("a round waits for its own slice's lock only: another slice's round goes ahead meanwhile", async () => {
    await liveWorkers(1);
    const bySlice = await tenantsBySlice(2, 1);
    const first = await runWithTasks(bySlice[0]![0]!, 10);
    const second = await runWithTasks(bySlice[1]![0]!, 10);
    const request = coalescedDispatch(deps(0, "adaptive", 2));
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let holding!: () => void;
    const locked = new Promise<void>((resolve) => {
      holding = resolve;
    });
    // Another coordinator's round of slice 0, in the middle of its transaction.
    const other = database.db.transaction(async (tx) => {
      await tx.execute(dispatchLock({ index: 0, count: 2 }));
      holding();
      await held;
    });
    await locked;
    let firstDone = false;
    const firstRound = request(first).then((n) => {
      firstDone = true;
      return n;
    });
    expect(await request(second)).toBeGreaterThan(0);
    expect(firstDone).toBe(false);
    release();
    await other;
    expect(await firstRound).toBeGreaterThan(0);
    expect(Object.keys(byRun(await queued())).sort()).toEqual([first, second].sort());
  });
});
