import { type Database, openDatabase, type Tx } from "@drover/db";
import type { BatchWriter, Provider, RowWriter, SourceRow, TaskContext } from "@drover/provider-sdk";
import { classifyError } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAssignment, WindowDeadlineError, windowTransaction, writeRows } from "../src/index.js";
import { claimedTaskDeps, deferred, type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

/**
 * A window's transaction that never settles (postgres.js after pg_terminate_backend, ~1 chaos stress
 * run in 10) must fail its window transiently after the deadline, end the backend it held, and leave
 * the task to a retry that writes every row exactly once. Real hangs stand in for the driver's: a
 * statement waiting on a row lock another connection holds, and a writer awaiting an answer that
 * never comes while its transaction sits idle on the server.
 */
let h: Harness;
/** Another session, holding the locks the windows wait on. */
let locker: Database;
beforeAll(async () => {
  h = await openHarness();
  locker = openDatabase(h.testDb.url, { max: 1 });
});
afterAll(async () => {
  await locker?.close();
  await h?.close();
});

/** Low enough to keep the file quick, high enough that a healthy window on a busy 2-core box fits. */
const DEADLINE_MS = 800;

type Named = { name: string };

function rowsOf(n: number, prefix: string): SourceRow<Named>[] {
  return Array.from({ length: n }, (_, i) => ({
    sourceId: `${prefix}${i}`,
    data: { name: `${prefix}${i}` },
  }));
}

/** One company per source row, named after it, so a duplicate shows as a name written twice. */
function companyWriter(tenantId: string): RowWriter<Named> {
  return async (tx: Tx, row) => {
    const [r] = await tx.execute<{ id: string }>(sql`
      insert into app.companies (tenant_id, name) values (${tenantId}, ${row.name}) returning id`);
    return { action: "created", recordType: "company", recordId: Number(r!.id) };
  };
}

function provider(runTask: (ctx: TaskContext) => Promise<void>): Provider {
  return {
    name: "test",
    phases: [["companies"]],
    validateConfig: () => undefined,
    seedPhase: async () => [],
    async runTask(ctx) {
      await runTask(ctx);
      return {};
    },
  };
}

function runOnce(p: Provider, taskId: number) {
  return runAssignment(
    {
      db: h.db,
      providers: new Map([["test", p]]),
      workerId: "w",
      maxAttempts: 3,
      notesCap: 100,
      windowDeadlineMs: DEADLINE_MS,
    },
    taskId,
    { shutdown: new AbortController().signal, working: () => {} },
  );
}

/** The released task is due again at once: the retry's backoff is not what these tests are about. */
async function dueNow(taskId: number): Promise<void> {
  await h.db.execute(sql`update drover.tasks set available_at = now() where id = ${taskId}`);
}

/** Every source row has one ledger slot and one company; none has two. */
async function expectEachRowOnce(runId: string, tenantId: string, rows: number): Promise<void> {
  const [ledger] = await h.db.execute<{ n: number; ids: number }>(sql`
    select count(*)::int as n, count(distinct source_id)::int as ids from drover.ledger where run_id = ${runId}`);
  expect(ledger).toEqual({ n: rows, ids: rows });
  const [companies] = await h.db.execute<{ n: number; names: number }>(sql`
    select count(*)::int as n, count(distinct name)::int as names from app.companies where tenant_id = ${tenantId}`);
  expect(companies).toEqual({ n: rows, names: rows });
}

/** Locks one row from the other session until release(); its waiters block meanwhile. */
async function holdRowLock(table: "app.companies" | "drover.tasks", id: number | string) {
  const held = deferred();
  const letGo = deferred();
  const lock = locker.sql.begin(async (tx) => {
    await tx.unsafe(`select id from ${table} where id = $1 for update`, [id]);
    held.resolve();
    await letGo.promise;
  });
  await held.promise;
  return {
    async release() {
      letGo.resolve();
      await lock;
    },
  };
}

async function backendAlive(pid: number): Promise<boolean> {
  const [r] = await h.db.execute<{ n: number }>(
    sql`select count(*)::int as n from pg_stat_activity where pid = ${pid}`,
  );
  return r!.n > 0;
}

describe("the window transaction deadline", () => {
  it("a window blocked on another session's row lock parks the run at the deadline, naming the table and the holder, its backend is ended, and the retry writes every row once", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    const [blocker] = await h.db.execute<{ id: string }>(sql`
      insert into app.companies (tenant_id, name) values ('blocker', 'blocker') returning id`);
    const lock = await holdRowLock("app.companies", blocker!.id);

    const rows = rowsOf(60, "lock-");
    const write = companyWriter(run.tenantId);
    let blockedPid: number | undefined;
    const p = provider(async (ctx) => {
      await ctx.writeRows(rows, async (tx, row, sourceId) => {
        // The first attempt's second window waits on the lock inside the row's savepoint.
        if (ctx.task.attempts === 1 && sourceId === "lock-30") {
          const [b] = await tx.execute<{ pid: number }>(sql`select pg_backend_pid() as pid`);
          blockedPid = b!.pid;
          await tx.execute(sql`update app.companies set name = name where id = ${blocker!.id}`);
        }
        return write(tx, row, sourceId);
      });
    });

    const started = Date.now();
    try {
      const first = await runOnce(p, task.id);
      // The destination held the window, not the worker: the run waits for it, spending no attempt.
      expect(first.status).toBe("parked");
      expect(first.status !== "dropped" && first.error).toMatch(
        /table app\.companies: waited 800 ms for a ShareLock held by pid \d+ \(select id from app\.companies/,
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS);
      // Ended on the server, not merely abandoned: no zombie waits on the lock to commit later.
      expect(await backendAlive(blockedPid!)).toBe(false);
      const [after] = await h.db.execute<{ status: string; processed_offset: number; attempts: number }>(
        sql`select status, processed_offset, attempts from drover.tasks where id = ${task.id}`,
      );
      expect(after).toEqual({ status: "pending", processed_offset: 25, attempts: 0 });
    } finally {
      await lock.release();
    }
    await dueNow(task.id);
    const retry = await runOnce(p, task.id);
    expect(retry).toMatchObject({ status: "succeeded", summary: { attempted: 35, created: 35 } });
    await expectEachRowOnce(run.id, run.tenantId, 60);
  });

  it("a batched window whose answer never comes fails transiently at the deadline, and its connection is never used again", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    const rows = rowsOf(60, "lost-");
    const write = companyWriter(run.tenantId);
    const pids = new Set<number>();
    let hungPid: number | undefined;
    const batch: BatchWriter<Named> = {
      async writeBatch(tx, batchRows) {
        const [b] = await tx.execute<{ pid: number }>(sql`select pg_backend_pid() as pid`);
        pids.add(b!.pid);
        const results = [];
        for (const r of batchRows) results.push(await write(tx, r.data, r.sourceId));
        if (hungPid === undefined && batchRows[0]!.sourceId === "lost-20") {
          // What the driver does in the defect: the writes went out and the answer never comes back.
          hungPid = b!.pid;
          await new Promise(() => {});
        }
        return results;
      },
      writeRow: write,
    };
    const p = provider(async (ctx) => {
      await ctx.writeBatches(rows, batch, { windowSize: 20 });
    });

    const first = await runOnce(p, task.id);
    expect(first.status).toBe("released");
    expect(first.status !== "dropped" && first.error).toMatch(/did not settle within 800 ms/);
    expect(await backendAlive(hungPid!)).toBe(false);

    pids.clear();
    await dueNow(task.id);
    const retry = await runOnce(p, task.id);
    expect(retry).toMatchObject({ status: "succeeded", summary: { attempted: 40, created: 40 } });
    expect(pids.has(hungPid!)).toBe(false);
    await expectEachRowOnce(run.id, run.tenantId, 60);
  });

  it("a task whose finish is blocked is released at the deadline, and the retry finishes it without writing again", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    const rows = rowsOf(30, "finish-");
    const write = companyWriter(run.tenantId);
    let lock: Awaited<ReturnType<typeof holdRowLock>> | undefined;
    const p = provider(async (ctx) => {
      await ctx.writeRows(rows, write);
      // Every window committed; the finish's UPDATE of the task row now waits on another session,
      // which lets go only well after the deadline (the release after it needs the row too).
      if (ctx.task.attempts === 1) {
        lock = await holdRowLock("drover.tasks", task.id);
        setTimeout(() => void lock?.release(), DEADLINE_MS * 2);
      }
    });
    const started = Date.now();
    try {
      const first = await runOnce(p, task.id);
      expect(first.status).toBe("released");
      expect(first.status !== "dropped" && first.error).toMatch(/did not settle within 800 ms/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS);
    } finally {
      await lock?.release();
    }
    await dueNow(task.id);
    const retry = await runOnce(p, task.id);
    expect(retry).toMatchObject({ status: "succeeded", summary: { attempted: 0 } });
    await expectEachRowOnce(run.id, run.tenantId, 30);
  });

  it("a window whose statement an operator cancels is released for a retry, not failed, and the retry writes every row once", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    const rows = rowsOf(40, "cancel-");
    const write = companyWriter(run.tenantId);
    const p = provider(async (ctx) => {
      await ctx.writeRows(rows, async (tx, row, sourceId) => {
        if (ctx.task.attempts === 1 && sourceId === "cancel-30") {
          const [b] = await tx.execute<{ pid: number }>(sql`select pg_backend_pid() as pid`);
          setTimeout(() => void locker.sql`select pg_cancel_backend(${b!.pid})`.catch(() => {}), 100);
          await tx.execute(sql`select pg_sleep(${(DEADLINE_MS * 4) / 1000})`);
        }
        return write(tx, row, sourceId);
      });
    });
    const first = await runOnce(p, task.id);
    expect(first.status).toBe("released");
    expect(first.status !== "dropped" && first.error).toMatch(/57014/);
    await dueNow(task.id);
    const retry = await runOnce(p, task.id);
    expect(retry).toMatchObject({ status: "succeeded", summary: { attempted: 15, created: 15 } });
    await expectEachRowOnce(run.id, run.tenantId, 40);
  });

  it("moving the cursor on past an exhausted position is bounded too", async () => {
    const run = await insertRun(h.db);
    const deps = await claimedTaskDeps(h.db, run, { windowDeadlineMs: DEADLINE_MS });
    // The checkpoint's UPDATE waits on the task row, locked by another connection.
    const lock = await holdRowLock("drover.tasks", deps.task.id);
    const err = await writeRows(deps, [], companyWriter(run.tenantId), { nextCursor: { page: 2 } })
      .catch((e: unknown) => e)
      .finally(() => lock.release());
    expect(err).toBeInstanceOf(WindowDeadlineError);
    expect(classifyError(err)).toBe("transient");
    expect(deps.task.cursor).toEqual({});
  });

  it("a window whose worker goes silent mid-transaction is ended by the server, long before the deadline, and its locks no longer block the worker taking over", async () => {
    const [company] = await h.db.execute<{ id: string }>(sql`
      insert into app.companies (tenant_id, name) values ('silent', 'before') returning id`);
    const silence = deferred<void>();
    const IDLE_MS = 500;
    // A deadline far away: only the server's idle limit can free the row in time.
    const window = windowTransaction(
      h.db,
      60_000,
      async (tx) => {
        await tx.execute(sql`update app.companies set name = 'cut off' where id = ${company!.id}`);
        // Cut off: the server waits for the next statement, which comes (too late) after the takeover.
        await silence.promise;
      },
      IDLE_MS,
    );
    window.catch(() => {});
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await locker.db.execute(sql`update app.companies set name = 'taken over' where id = ${company!.id}`);
    expect(Date.now() - started).toBeLessThan(10_000);
    silence.resolve();
    const err = await window.catch((e: unknown) => e);
    expect(classifyError(err)).toBe("transient");
    const [row] = await h.db.execute<{ name: string }>(
      sql`select name from app.companies where id = ${company!.id}`,
    );
    expect(row!.name).toBe("taken over");
  });

  it("does not fire for windows that each finish in time, however long the page takes", async () => {
    const run = await insertRun(h.db);
    const deps = await claimedTaskDeps(h.db, run, { windowDeadlineMs: DEADLINE_MS, windowSize: 2 });
    const write = companyWriter(run.tenantId);
    // A quarter of the deadline per window (room for a busy machine), six windows: the page outlasts
    // the deadline, no window does.
    const slow: RowWriter<Named> = async (tx, row, id) => {
      await tx.execute(sql`select pg_sleep(${DEADLINE_MS / 8 / 1000})`);
      return write(tx, row, id);
    };
    const started = Date.now();
    const summary = await writeRows(deps, rowsOf(12, "slow-"), slow);
    expect(Date.now() - started).toBeGreaterThan(DEADLINE_MS);
    expect(summary).toMatchObject({ attempted: 12, created: 12, failed: 0 });
    expect(deps.task.processedOffset).toBe(12);
    await expectEachRowOnce(run.id, run.tenantId, 12);
  });

  it("a window's limits hold from its first statement, though they are sent without waiting for them", async () => {
    const [limits] = await windowTransaction(h.db, DEADLINE_MS, (tx) =>
      tx.execute<{ statement: string; idle: string }>(sql`
        select current_setting('statement_timeout') as statement,
               current_setting('idle_in_transaction_session_timeout') as idle`),
    );
    // The deadline plus the wait for ending a backend (5 s), and the idle limit (10 s) no later.
    expect(limits).toEqual({ statement: `${DEADLINE_MS + 5_000}ms`, idle: `${DEADLINE_MS + 5_000}ms` });
    // Local to the window: the connection's next transaction is back to the server's defaults.
    const [after] = await h.db.execute<{ statement: string }>(
      sql`select current_setting('statement_timeout') as statement`,
    );
    expect(after!.statement).toBe("0");
  });
});
