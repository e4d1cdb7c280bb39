import { randomUUID } from "node:crypto";
import { openDatabase, runs, tasks } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { registerWorker } from "@drover/engine";
import { sources as providers } from "@drover/source-registry";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CoordinatorContext } from "../src/context.js";
import { reaperPass } from "../src/reaper.js";
import { runView } from "../src/run-view.js";
import { testContext } from "./test-context.js";

let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
let ctx: CoordinatorContext;
let dispatches = 0;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
  ctx = testContext(
    database.db,
    { DROVER_STALE_TASK_MS: "60000", DROVER_REDISPATCH_AFTER_MS: "60000", DROVER_MAX_ATTEMPTS: "3" },
    async () => {
      dispatches++;
      return 0;
    },
  );
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

async function run(overrides: Partial<typeof runs.$inferInsert> = {}) {
  const [r] = await database.db
    .insert(runs)
    .values({
      tenantId: `t-${randomUUID().slice(0, 6)}`,
      source: "crm",
      sourceAccount: "a",
      kinds: ["organizations"],
      plan: [["organizations"]],
      status: "running",
      sourceConfig: { baseUrl: "http://127.0.0.1:1", settings: {} },
      ...overrides,
    })
    .returning();
  return r!;
}

async function task(runId: string, overrides: Partial<typeof tasks.$inferInsert> = {}) {
  const [t] = await database.db
    .insert(tasks)
    .values({ runId, kind: "organizations", phase: 0, seedKey: randomUUID(), cursor: {}, ...overrides })
    .returning();
  return t!;
}

const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000);

describe("reaper pass", () => {
  it("releases a running task whose worker died, and fails it once its attempts since its last window are spent", async () => {
    const r = await run();
    const dead = await task(r.id, {
      status: "running",
      lockedBy: "gone/1",
      lockedAt: minutesAgo(5),
      attempts: 1,
    });
    const poison = await task(r.id, {
      status: "running",
      lockedBy: "gone/2",
      lockedAt: minutesAgo(5),
      // Three claims in a row that committed no window: the task kills its worker.
      attempts: 3,
      attemptsSinceProgress: 3,
    });
    const alive = await task(r.id, {
      status: "running",
      lockedBy: "here/1",
      lockedAt: new Date(),
      attempts: 1,
    });
    const report = await reaperPass(ctx);
    expect(report).toMatchObject({ released: 1, failed: 1 });
    const rows = await database.db.execute<{ id: string; status: string; locked_by: string | null }>(
      sql`select id, status, locked_by from drover.tasks where run_id = ${r.id} order by id`,
    );
    expect(rows.map((t) => [Number(t.id), t.status, t.locked_by])).toEqual([
      [dead.id, "pending", null],
      [poison.id, "failed", null],
      [alive.id, "running", "here/1"],
    ]);
    expect(dispatches).toBeGreaterThan(0);
  });

  it("releases a dead worker's tasks as soon as its liveness record expires, never a live worker's", async () => {
    const r = await run();
    const live = randomUUID();
    const dead = randomUUID();
    await registerWorker(database.db, {
      id: live,
      workerId: "live-worker",
      laneWidth: 4,
      livenessMs: 60_000,
    });
    await database.db.execute(sql`
      insert into drover.workers (id, worker_id, lane_width, expires_at)
      values (${dead}::uuid, 'dead-worker', 4, now() - interval '1 second')`);
    // Locks far fresher than the stale threshold: only the liveness record tells these apart.
    const ofDead = await task(r.id, {
      status: "running",
      lockedBy: "dead-worker/1",
      lockedAt: new Date(),
      worker: dead,
      attempts: 1,
    });
    const ofGone = await task(r.id, {
      status: "running",
      lockedBy: "gone/1",
      lockedAt: new Date(),
      worker: randomUUID(),
      attempts: 1,
    });
    const ofLive = await task(r.id, {
      status: "running",
      lockedBy: "live-worker/1",
      lockedAt: minutesAgo(0.5),
      worker: live,
      attempts: 1,
    });
    const report = await reaperPass(ctx);
    expect(report.deadWorkers).toEqual(["dead-worker"]);
    const rows = await database.db.execute<{ id: string; status: string; locked_by: string | null }>(
      sql`select id, status, locked_by from drover.tasks where run_id = ${r.id} order by id`,
    );
    expect(rows.map((t) => [Number(t.id), t.status, t.locked_by])).toEqual([
      [ofDead.id, "pending", null],
      [ofGone.id, "pending", null],
      [ofLive.id, "running", "live-worker/1"],
    ]);
    const records = await database.db.execute<{ worker_id: string }>(
      sql`select worker_id from drover.workers`,
    );
    expect(records.map((w) => w.worker_id)).toEqual(["live-worker"]);
  });

  it("unmarks a task the broker lost so the dispatcher publishes it again", async () => {
    const r = await run();
    const lost = await task(r.id, { dispatchedAt: minutesAgo(10) });
    const queued = await task(r.id, { dispatchedAt: new Date() });
    await reaperPass(ctx);
    const rows = await database.db.execute<{ id: string; dispatched: boolean }>(
      sql`select id, dispatched_at is not null as dispatched from drover.tasks where run_id = ${r.id} order by id`,
    );
    expect(rows.map((t) => [Number(t.id), t.dispatched])).toEqual([
      [lost.id, false],
      [queued.id, true],
    ]);
  });

  it("prunes a finished run past retention (tasks, notes, window commits), keeping its counts on the run", async () => {
    const old = await run({ status: "succeeded", finishedAt: new Date(Date.now() - 100 * 86_400_000) });
    const recent = await run({ status: "succeeded", finishedAt: new Date() });
    for (const r of [old, recent]) {
      await task(r.id, { status: "succeeded", stats: { created: 20, failed: 1 } });
      await task(r.id, { status: "succeeded", stats: { created: 5, skipped: 2 } });
      await database.db.execute(
        sql`insert into drover.notes (run_id, level, kind, subject_id, reason) values (${r.id}, 'error', 'organizations', '9', 'bad')`,
      );
      // The run's skipped rows are the ledger slots it holds as skipped.
      // One window's commit, for the throughput chart.
      await database.db.execute(
        sql`insert into drover.window_commits (run_id, task_id, rows) values (${r.id}, 0, 25)`,
      );
      for (const id of ["7", "8"])
        await database.db.execute(sql`
          insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, reason, run_id)
          values (${r.tenantId}, 'crm', 'a', 'organizations', ${id}, 'skipped', 'not linked', ${r.id})`);
    }
    const before = await runView(database.db, providers, old);
    expect((await reaperPass(ctx)).pruned).toBe(1);
    const count = async (table: string, runId: string) =>
      Number(
        (
          await database.db.execute<{ n: string }>(
            sql`select count(*) as n from ${sql.raw(table)} where run_id = ${runId}`,
          )
        )[0]!.n,
      );
    expect(await count("drover.tasks", old.id)).toBe(0);
    expect(await count("drover.notes", old.id)).toBe(0);
    expect(await count("drover.window_commits", old.id)).toBe(0);
    expect(await count("drover.window_commits", recent.id)).toBe(1);
    expect(await count("drover.tasks", recent.id)).toBe(2);
    const [pruned] = await database.db.select().from(runs).where(sql`id = ${old.id}`);
    const after = await runView(database.db, providers, pruned!);
    expect(after.progress).toEqual(before.progress);
    expect(after.tasks).toEqual(before.tasks);
    expect(after.progress[0]).toMatchObject({ imported: 25n, failed: 1n, skipped: 2n });
  });
});
