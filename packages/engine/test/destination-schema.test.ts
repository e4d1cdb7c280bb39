import { type Database, openDatabase } from "@drover/db";
import type { Provider, RowWriter, SourceRow } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAssignment, type TaskRunnerDeps } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

/**
 * A multi-day run outlives deploys of the product: its destination table may gain a NOT NULL
 * column, lose a column the run writes, or be renamed while the run goes on. Each row would then
 * fail the same way; the run must instead wait, say why once, and go on by itself once the schema
 * takes rows again.
 */
let h: Harness;
/** The product's own session: its migration holds the locks a window waits on. */
let product: Database;
beforeAll(async () => {
  h = await openHarness();
  product = openDatabase(h.testDb.url, { max: 1 });
  await h.db.execute(sql`create schema product`);
  await h.db.execute(
    sql`create table product.things (tenant_id text not null, id bigserial primary key, name text)`,
  );
});
afterAll(async () => {
  await product?.close();
  await h?.close();
});

type Thing = { name: string | null };

const thingWriter: RowWriter<Thing> = async (tx, row) => {
  const [r] = await tx.execute<{ id: string }>(sql`
    insert into product.things (tenant_id, name) values ('t', ${row.name}) returning id`);
  return { action: "created", recordType: "thing", recordId: Number(r!.id) };
};

const rows = (prefix: string, n: number): SourceRow<Thing>[] =>
  Array.from({ length: n }, (_, i) => ({ sourceId: `${prefix}${i}`, data: { name: `${prefix} ${i}` } }));

function providerWriting(source: () => SourceRow<Thing>[]): Provider {
  return {
    name: "test",
    phases: [["companies"]],
    validateConfig: () => undefined,
    seedPhase: async () => [],
    async runTask(ctx) {
      await ctx.writeRows(source(), thingWriter);
      return {};
    },
  };
}

const PROBE_MS = 60_000;

function deps(provider: Provider): TaskRunnerDeps {
  return {
    db: h.db,
    providers: new Map([["test", provider]]),
    workerId: "w",
    maxAttempts: 3,
    notesCap: 100,
    destinationProbeMs: PROBE_MS,
  };
}

const attempt = (d: TaskRunnerDeps, taskId: number) =>
  runAssignment(d, taskId, { shutdown: new AbortController().signal, working: () => {} });

async function notesOf(runId: string) {
  return h.db.execute<{ level: string; subject_id: string | null; reason: string }>(sql`
    select level, subject_id, reason from drover.notes where run_id = ${runId}::uuid order by id`);
}

async function taskState(id: number) {
  const [t] = await h.db.execute<{
    status: string;
    attempts: number;
    parked: boolean;
    last_error: string;
  }>(sql`
    select status, attempts, available_at > now() + interval '30 seconds' as parked, last_error
      from drover.tasks where id = ${id}`);
  return t!;
}

describe("the destination's schema changes under a run", () => {
  it("a NOT NULL column the writer does not set parks the run with one note naming table, column and SQLSTATE, fails no row, and the run goes on once the column is gone", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    const sibling = await insertTask(h.db, run.id);
    const d = deps(providerWriting(() => rows("nn", 30)));
    await h.db.execute(sql`alter table product.things add column region text not null`);
    try {
      for (let i = 0; i < 2; i++) {
        const outcome = await attempt(d, task.id);
        expect(outcome.status).toBe("parked");
        await h.db.execute(sql`update drover.tasks set available_at = now() where id = ${task.id}`);
      }
      const [t, s] = [await taskState(task.id), await taskState(sibling.id)];
      expect(t.last_error).toMatch(/product\.things.*column region.*SQLSTATE 23502/);
      expect({ status: s.status, attempts: s.attempts, parked: s.parked }).toEqual({
        status: "pending",
        attempts: 0,
        parked: true,
      });
      const notes = await notesOf(run.id);
      // One warning for the run, however many attempts met it; no row failed.
      expect(notes).toHaveLength(1);
      expect(notes[0]).toMatchObject({ level: "warn", subject_id: null });
      expect(notes[0]!.reason).toMatch(/table product\.things, column region: .*SQLSTATE 23502/);
    } finally {
      await h.db.execute(sql`alter table product.things drop column region`);
    }
    const outcome = await attempt(d, task.id);
    expect(outcome).toMatchObject({ status: "succeeded" });
    const [written] = await h.db.execute<{ n: number }>(sql`
      select count(*)::int as n from drover.ledger where run_id = ${run.id}::uuid`);
    expect(written!.n).toBe(30);
    expect((await notesOf(run.id)).filter((n) => n.level === "error")).toEqual([]);
  });

  it("a row whose own value breaks a NOT NULL column the writer sets fails alone, as a row error", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    const mixed = rows("rv", 5);
    mixed[2] = { sourceId: "rv2", data: { name: null } };
    await h.db.execute(sql`alter table product.things alter column name set not null`);
    try {
      const outcome = await attempt(deps(providerWriting(() => mixed)), task.id);
      expect(outcome).toMatchObject({ status: "succeeded" });
    } finally {
      await h.db.execute(sql`alter table product.things alter column name drop not null`);
    }
    const notes = await notesOf(run.id);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ level: "error", subject_id: "rv2" });
    expect(notes[0]!.reason).toMatch(/SQLSTATE 23502/);
  });

  it("a renamed table or a dropped column the writer writes parks the run instead of failing its task", async () => {
    for (const [change, undo, sqlstate] of [
      [
        sql`alter table product.things rename to things_v2`,
        sql`alter table product.things_v2 rename to things`,
        "42P01",
      ],
      [
        sql`alter table product.things rename column name to title`,
        sql`alter table product.things rename column title to name`,
        "42703",
      ],
    ] as const) {
      const run = await insertRun(h.db);
      const task = await insertTask(h.db, run.id);
      const d = deps(providerWriting(() => rows(`ren${sqlstate}`, 3)));
      await h.db.execute(change);
      try {
        const outcome = await attempt(d, task.id);
        expect(outcome.status).toBe("parked");
        expect((await taskState(task.id)).last_error).toMatch(new RegExp(`SQLSTATE ${sqlstate}`));
      } finally {
        await h.db.execute(undo);
      }
      await h.db.execute(sql`update drover.tasks set available_at = now() where id = ${task.id}`);
      expect(await attempt(d, task.id)).toMatchObject({ status: "succeeded" });
      expect((await notesOf(run.id)).map((n) => n.level)).toEqual(["warn"]);
    }
  });
});

/** Holds `statement`'s locks in the product's session, as a migration mid-flight does, until released. */
async function holdInProductSession(statement: string) {
  let held!: () => void;
  const holding = new Promise<void>((resolve) => {
    held = resolve;
  });
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  const migration = product.sql.begin(async (tx) => {
    await tx.unsafe(statement);
    held();
    await released;
  });
  await holding;
  return async () => {
    letGo();
    await migration;
  };
}

describe("a destination that holds a window past its limit", () => {
  const DEADLINE_MS = 800;

  it("a product's migration locking the table past the window's deadline parks the run, naming the table and the lock's holder, and the run goes on once the lock is gone", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    const sibling = await insertTask(h.db, run.id);
    const d = { ...deps(providerWriting(() => rows("lk", 30))), windowDeadlineMs: DEADLINE_MS };
    const release = await holdInProductSession("lock table product.things in access exclusive mode");
    try {
      for (let i = 0; i < 2; i++) {
        const outcome = await attempt(d, task.id);
        expect(outcome.status).toBe("parked");
        await h.db.execute(sql`update drover.tasks set available_at = now() where id = ${task.id}`);
      }
      const [t, s] = [await taskState(task.id), await taskState(sibling.id)];
      expect(t.last_error).toMatch(
        /table product\.things: waited 800 ms for a RowExclusiveLock held by pid \d+ \(lock table product\.things/,
      );
      // Waiting on the product spends none of the task's attempts, and its siblings wait with it.
      expect(t.attempts).toBe(0);
      expect({ status: s.status, attempts: s.attempts, parked: s.parked }).toEqual({
        status: "pending",
        attempts: 0,
        parked: true,
      });
      const notes = await notesOf(run.id);
      expect(notes).toHaveLength(1);
      expect(notes[0]).toMatchObject({ level: "warn", subject_id: null });
    } finally {
      await release();
    }
    expect(await attempt(d, task.id)).toMatchObject({ status: "succeeded", summary: { created: 30 } });
    const [written] = await h.db.execute<{ n: number; ids: number }>(sql`
      select count(*)::int as n, count(distinct source_id)::int as ids from drover.ledger where run_id = ${run.id}::uuid`);
    expect(written).toEqual({ n: 30, ids: 30 });
  });

  it("the server's own lock timeout or statement timeout on a window parks the run with its SQLSTATE", async () => {
    for (const [limit, sqlstate] of [
      ["lock_timeout", "55P03"],
      ["statement_timeout", "57014"],
    ] as const) {
      const run = await insertRun(h.db);
      const task = await insertTask(h.db, run.id);
      // The product's operators set the limit on the destination (a role's or database's setting);
      // the window's session inherits it. Set here inside the window, where this test can scope it.
      const limited: RowWriter<Thing> = async (tx, row, sourceId, slot) => {
        await tx.execute(sql`select set_config(${limit}, '150ms', true)`);
        return thingWriter(tx, row, sourceId, slot);
      };
      const p: Provider = {
        ...providerWriting(() => []),
        async runTask(ctx) {
          await ctx.writeRows(rows(`to${sqlstate}`, 3), limited);
          return {};
        },
      };
      const release = await holdInProductSession("lock table product.things in access exclusive mode");
      try {
        const outcome = await attempt(deps(p), task.id);
        expect(outcome.status).toBe("parked");
        const t = await taskState(task.id);
        expect(t.last_error).toMatch(new RegExp(`held a window past its limit .*SQLSTATE ${sqlstate}`));
        expect(t.attempts).toBe(0);
      } finally {
        await release();
      }
      await h.db.execute(sql`update drover.tasks set available_at = now() where id = ${task.id}`);
      expect(await attempt(deps(p), task.id)).toMatchObject({ status: "succeeded" });
      expect((await notesOf(run.id)).map((n) => n.level)).toEqual(["warn"]);
    }
  });
});
