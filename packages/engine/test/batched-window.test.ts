import type { Tx } from "@drover/db";
import { claimLedgerSlot } from "@drover/ledger";
import { type BatchWriter, type SourceRow, TransientError } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  LostClaimError,
  MAX_SAVEPOINTS_PER_TRANSACTION,
  SavepointLimitError,
  TaskCancelledError,
  writeBatches,
  writeRows,
} from "../src/index.js";
import { claimedTaskDeps, companyWriter, type Harness, insertRun, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

type Company = { name: string | null };

/** One multi-row insert per window; a null name violates NOT NULL and fails the whole statement. */
function companyBatch(tenant: string, calls: { batches: number; rows: number }): BatchWriter<Company> {
  return {
    async writeBatch(tx: Tx, rows) {
      calls.batches++;
      const ids = await tx.execute<{ id: string }>(sql`
        insert into app.companies (tenant_id, name)
        select ${tenant}, n from unnest(${sql.param(rows.map((r) => r.data.name))}::text[]) with ordinality as u(n, i)
        order by i
        returning id`);
      return ids.map((r) => ({ action: "created" as const, recordType: "company", recordId: Number(r.id) }));
    },
    async writeRow(tx, row, sourceId) {
      calls.rows++;
      return companyWriter(tx, row, sourceId);
    },
  };
}

function rowsOf(n: number, prefix: string, bad: (i: number) => boolean = () => false): SourceRow<Company>[] {
  return Array.from({ length: n }, (_, i) => ({
    sourceId: `${prefix}${i}`,
    data: { name: bad(i) ? null : `${prefix} ${i}` },
  }));
}

const claimed = (run: Awaited<ReturnType<typeof insertRun>>, extra: Record<string, unknown> = {}) =>
  claimedTaskDeps(h.db, run, extra);

/**
 * A tenant imported with `imported` (a first run, ended), then a second run writing `rows`: its
 * summary, the size of each batch it wrote and how many windows it committed.
 */
async function rerunCountingBatches(
  prefix: string,
  rows: (prefix: string) => SourceRow<Company>[],
  imported: (all: SourceRow<Company>[]) => SourceRow<Company>[],
) {
  const first = await insertRun(h.db);
  const all = rows(`${prefix}-${first.id.slice(0, 6)}-`);
  await writeBatches(
    await claimed(first),
    imported(all),
    companyBatch(first.tenantId, { batches: 0, rows: 0 }),
    {
      windowSize: 50,
    },
  );
  await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${first.id}`);
  const deps = await claimed(await insertRun(h.db, { tenantId: first.tenantId }));
  const sizes: number[] = [];
  const batch = companyBatch(first.tenantId, { batches: 0, rows: 0 });
  const summary = await writeBatches(
    deps,
    all,
    {
      writeRow: batch.writeRow,
      writeBatch: (tx, r) => {
        sizes.push(r.length);
        return batch.writeBatch(tx, r);
      },
    },
    { windowSize: 50 },
  );
  const windows = await one<{ n: number }>(
    sql`select count(*)::int as n from drover.window_commits where task_id = ${deps.task.id}`,
  );
  return { summary, sizes, windows: windows.n, deps };
}

/** The database, counting the statements sent outside a transaction and the transactions opened. */
function countingStatements(
  db: Harness["db"],
  counts: { execute: number; transaction: number },
): Harness["db"] {
  return new Proxy(db, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (prop === "execute" || prop === "transaction")
        return (...args: unknown[]) => {
          counts[prop]++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

async function one<T>(query: ReturnType<typeof sql>): Promise<T> {
  const [r] = await h.db.execute<Record<string, unknown>>(query);
  return r as T;
}

describe("batched windows", () => {
  it("a clean window is one batch and one ledger claim, with the checkpoint in its transaction", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run);
    const calls = { batches: 0, rows: 0 };
    const summary = await writeBatches(deps, rowsOf(120, "ok-"), companyBatch(run.tenantId, calls), {
      windowSize: 50,
    });
    expect(summary).toMatchObject({ attempted: 120, created: 120, failed: 0 });
    expect(calls).toEqual({ batches: 3, rows: 0 });
    const ledger = await one<{ n: number }>(
      sql`select count(*)::int as n from drover.ledger where run_id = ${run.id}`,
    );
    expect(ledger.n).toBe(120);
    const task = await one<{ processed_offset: number; rows_read: string; rows_written: string }>(
      sql`select processed_offset, rows_read, rows_written from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task).toMatchObject({ processed_offset: 120, rows_read: "120", rows_written: "120" });
    // Each committed window is on record, for the run's throughput over time.
    const windows = await one<{ n: number; rows: number }>(
      sql`select count(*)::int as n, sum(rows)::int as rows from drover.window_commits where task_id = ${deps.task.id}`,
    );
    expect(windows).toEqual({ n: 3, rows: 120 });
    // The listing's last window recorded its ids, for verification against the ledger.
    const listed = await one<{ n: number }>(
      sql`select cardinality(listed_ids)::int as n from drover.tasks where id = ${deps.task.id}`,
    );
    expect(listed.n).toBe(120);
  });

  it("without a ledger a clean window is one batch too: no claim, no fallback, no listing kept in the task", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run, { ledger: "none" });
    const calls = { batches: 0, rows: 0 };
    const upserting: BatchWriter<Company> = {
      async writeBatch(tx, rows) {
        calls.batches++;
        await companyBatch(run.tenantId, { batches: 0, rows: 0 }).writeBatch(tx, rows);
        return rows.map(() => ({ action: "upserted" as const, replaced: false }));
      },
      async writeRow() {
        calls.rows++;
        return { action: "upserted", replaced: false };
      },
    };
    const summary = await writeBatches(deps, rowsOf(120, "none-"), upserting, { windowSize: 50 });
    expect(summary).toMatchObject({ attempted: 120, created: 120, failed: 0 });
    expect(calls).toEqual({ batches: 3, rows: 0 });
    const ledger = await one<{ n: number }>(
      sql`select count(*)::int as n from drover.ledger where run_id = ${run.id}`,
    );
    expect(ledger.n).toBe(0);
    // Nothing compares a ledger-less copy's listing with a ledger: a table's keys are not kept.
    const task = await one<{ listed: number | null; processed_offset: number }>(
      sql`select cardinality(listed_ids)::int as listed, processed_offset from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task).toEqual({ listed: null, processed_offset: 120 });
  });

  it("a window holding one bad row loses only that row; the rest commits through the per-row fallback", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run);
    const calls = { batches: 0, rows: 0 };
    const rows = rowsOf(100, "bad-", (i) => i === 73);
    const summary = await writeBatches(deps, rows, companyBatch(run.tenantId, calls), { windowSize: 50 });
    expect(summary).toMatchObject({ attempted: 100, created: 99, failed: 1 });
    // The first window went through as a batch; only the second was written again row by row.
    expect(calls).toEqual({ batches: 2, rows: 50 });
    const notes = await h.db.execute<{ subject_id: string; reason: string }>(
      sql`select subject_id, reason from drover.notes where run_id = ${run.id} and level = 'error'`,
    );
    expect(notes.map((n) => n.subject_id)).toEqual(["bad-73"]);
    expect(notes[0]!.reason).toMatch(/23502/);
    const ledger = await one<{ n: number; distinct_ids: number }>(
      sql`select count(*)::int as n, count(distinct source_id)::int as distinct_ids from drover.ledger where run_id = ${run.id}`,
    );
    expect(ledger).toEqual({ n: 99, distinct_ids: 99 });
    expect(deps.task.processedOffset).toBe(100);
  });

  it("rows the ledger already holds are written as nothing and counted already here; the rest is one batch", async () => {
    const first = await insertRun(h.db);
    const rows = rowsOf(40, `dup-${first.id.slice(0, 6)}-`);
    await writeRows(await claimed(first), rows.slice(0, 10), companyWriter);
    await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${first.id}`);
    const second = await insertRun(h.db, { tenantId: first.tenantId });
    const calls = { batches: 0, rows: 0 };
    const sizes: number[] = [];
    const batch = companyBatch(first.tenantId, calls);
    const sized: BatchWriter<Company> = {
      writeRow: batch.writeRow,
      writeBatch: (tx, r) => {
        sizes.push(r.length);
        return batch.writeBatch(tx, r);
      },
    };
    const seq = () =>
      one<{ v: string }>(sql`select pg_sequence_last_value('app.companies_id_seq')::text as v`);
    const before = await seq();
    const summary = await writeBatches(await claimed(second), rows, sized, { windowSize: 40 });
    expect(summary).toMatchObject({ attempted: 40, created: 30, alreadyHere: 10 });
    // No insert for the held rows, so no rollback, no row-by-row rewrite, no id burnt.
    expect(sizes).toEqual([30]);
    expect(calls.rows).toBe(0);
    expect(Number((await seq()).v) - Number(before.v)).toBe(30);
  });

  it("a slot another writer claims after the window's ledger query is still caught: only that row is undone", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run);
    const rows = rowsOf(40, `race-${run.id.slice(0, 6)}-`);
    const calls = { batches: 0, rows: 0 };
    const batch = companyBatch(run.tenantId, calls);
    let raced = false;
    const racing: BatchWriter<Company> = {
      writeRow: batch.writeRow,
      async writeBatch(tx, r) {
        if (!raced) {
          raced = true;
          // Another run commits row 7's slot between this window's ledger query and its claim.
          const other = await insertRun(h.db, { tenantId: run.tenantId, status: "succeeded" });
          const won = await claimLedgerSlot(h.db, {
            ...deps.run,
            kind: deps.task.kind,
            sourceId: rows[7]!.sourceId,
            action: "created",
            recordType: "company",
            recordId: 1,
            runId: other.id,
          });
          expect(won).toBe(true);
        }
        return batch.writeBatch(tx, r);
      },
    };
    const before = await one<{ n: number }>(sql`select count(*)::int as n from app.companies`);
    const summary = await writeBatches(deps, rows, racing, { windowSize: 40 });
    expect(summary).toMatchObject({ attempted: 40, created: 39, alreadyHere: 1 });
    // The batch lost a slot and was rolled back; the window was written again row by row, where
    // row 7, now held, was not written at all.
    expect(calls).toEqual({ batches: 1, rows: 39 });
    const after = await one<{ n: number }>(sql`select count(*)::int as n from app.companies`);
    expect(after.n - before.n).toBe(39);
  });

  it("never opens more than 64 savepoints in one transaction, even when every window falls back", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run);
    const perTransaction = new Map<string, number>();
    const calls = { batches: 0, rows: 0 };
    const batch = companyBatch(run.tenantId, calls);
    const counting: BatchWriter<Company> = {
      writeBatch: batch.writeBatch,
      async writeRow(tx, row, id) {
        // txid_current() inside a savepoint is the top-level transaction's id.
        const [x] = await tx.execute<{ xid: string }>(sql`select txid_current()::text as xid`);
        perTransaction.set(x!.xid, (perTransaction.get(x!.xid) ?? 0) + 1);
        return batch.writeRow(tx, row, id);
      },
    };
    // Windows of 500 rows, each with a bad row: 1,000 rows written through savepoints.
    const rows = rowsOf(1000, "sp-", (i) => i % 500 === 7);
    const summary = await writeBatches(deps, rows, counting, { windowSize: 500 });
    expect(summary).toMatchObject({ created: 998, failed: 2 });
    expect([...perTransaction.values()].reduce((a, b) => a + b, 0)).toBe(1000);
    expect(Math.max(...perTransaction.values())).toBeLessThanOrEqual(MAX_SAVEPOINTS_PER_TRANSACTION);
  });

  it("refuses a per-row window larger than the savepoint limit instead of overflowing the cache", async () => {
    const run = await insertRun(h.db);
    await expect(
      writeRows(await claimed(run, { windowSize: 65 }), rowsOf(70, "big-"), companyWriter),
    ).rejects.toBeInstanceOf(SavepointLimitError);
    await expect(
      writeBatches(
        await claimed(run, { savepointLimit: 10 }),
        rowsOf(30, "small-", (i) => i === 3),
        companyBatch(run.tenantId, { batches: 0, rows: 0 }),
      ),
    ).rejects.toBeInstanceOf(SavepointLimitError);
    const written = await one<{ n: number }>(
      sql`select count(*)::int as n from drover.ledger where run_id = ${run.id}`,
    );
    expect(written.n).toBe(0);
  });

  it("a page the ledger holds whole is passed with one checkpoint: no window, the writer never built, the cursor moved on", async () => {
    const first = await insertRun(h.db);
    const rows = rowsOf(120, `whole-${first.id.slice(0, 6)}-`);
    await writeBatches(await claimed(first), rows, companyBatch(first.tenantId, { batches: 0, rows: 0 }), {
      windowSize: 50,
    });
    await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${first.id}`);
    const second = await insertRun(h.db, { tenantId: first.tenantId });
    const statements = { execute: 0, transaction: 0 };
    const deps = await claimed(second, {
      db: countingStatements(h.db, statements),
      takeSourceCalls: () => ({ source_requests: 1, source_tokens: 20 }),
    });
    let built = 0;
    const summary = await writeBatches(
      deps,
      rows,
      async () => {
        built++;
        return companyBatch(first.tenantId, { batches: 0, rows: 0 });
      },
      { windowSize: 50, nextCursor: { page: 1 } },
    );
    expect(summary).toMatchObject({ attempted: 120, created: 0, alreadyHere: 120 });
    expect(built).toBe(0);
    // The question and the checkpoint in one statement: one round trip, no transaction to open.
    expect(statements).toEqual({ execute: 1, transaction: 0 });
    const task = await one<{ cursor: unknown; processed_offset: number; stats: Record<string, number> }>(
      sql`select cursor, processed_offset, stats from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task).toMatchObject({
      cursor: { page: 1 },
      processed_offset: 0,
      stats: { already_here: 120, source_requests: 1, source_tokens: 20 },
    });
    expect(deps.task).toMatchObject({ cursor: { page: 1 }, processedOffset: 0 });
    // One checkpoint for the page, where its three windows would each have committed one.
    const windows = await one<{ n: number; rows: number }>(
      sql`select count(*)::int as n, sum(rows)::int as rows from drover.window_commits where task_id = ${deps.task.id}`,
    );
    expect(windows).toEqual({ n: 1, rows: 120 });
  });

  it("a page the ledger holds whole, passed by an attempt that lost its claim, moves nothing and says so", async () => {
    const first = await insertRun(h.db);
    const rows = rowsOf(40, `lost-${first.id.slice(0, 6)}-`);
    await writeBatches(await claimed(first), rows, companyBatch(first.tenantId, { batches: 0, rows: 0 }));
    await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${first.id}`);
    const second = await insertRun(h.db, { tenantId: first.tenantId });
    const deps = await claimed(second);
    const stale = { ...deps, task: { ...deps.task }, claimToken: `${deps.claimToken}-stale` };
    await expect(
      writeBatches(stale, rows, companyBatch(first.tenantId, { batches: 0, rows: 0 }), {
        nextCursor: { page: 1 },
      }),
    ).rejects.toBeInstanceOf(LostClaimError);
    const task = await one<{ cursor: unknown; stats: Record<string, number> }>(
      sql`select cursor, stats from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task.cursor).not.toEqual({ page: 1 });
    expect(task.stats.already_here ?? 0).toBe(0);
  });

  it("held rows running into new ones: the held run is passed in one checkpoint, the rest written in windows by a writer built once", async () => {
    const first = await insertRun(h.db);
    const rows = rowsOf(120, `part-${first.id.slice(0, 6)}-`);
    await writeBatches(
      await claimed(first),
      rows.slice(0, 60),
      companyBatch(first.tenantId, { batches: 0, rows: 0 }),
      { windowSize: 50 },
    );
    await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${first.id}`);
    const second = await insertRun(h.db, { tenantId: first.tenantId });
    // The page's source call, taken for the one-statement pass that did not move, is carried by the
    // checkpoint that did.
    let pending = { source_requests: 1, source_tokens: 20 };
    const deps = await claimed(second, {
      takeSourceCalls: () => {
        const taken = pending;
        pending = { source_requests: 0, source_tokens: 0 };
        return taken;
      },
      restoreSourceCalls: (taken: typeof pending) => {
        pending = {
          source_requests: pending.source_requests + taken.source_requests,
          source_tokens: pending.source_tokens + taken.source_tokens,
        };
      },
    });
    const calls = { batches: 0, rows: 0 };
    const sizes: number[] = [];
    let built = 0;
    const summary = await writeBatches(
      deps,
      rows,
      async () => {
        built++;
        const batch = companyBatch(first.tenantId, calls);
        return {
          writeRow: batch.writeRow,
          writeBatch: (tx: Tx, r: Parameters<typeof batch.writeBatch>[1]) => {
            sizes.push(r.length);
            return batch.writeBatch(tx, r);
          },
        };
      },
      { windowSize: 50 },
    );
    expect(summary).toMatchObject({ attempted: 120, created: 60, alreadyHere: 60 });
    expect(built).toBe(1);
    // The windows start where the held rows end: rows 60..109, then 110..119.
    expect(sizes).toEqual([50, 10]);
    expect(deps.task.processedOffset).toBe(120);
    const task = await one<{ stats: Record<string, number> }>(
      sql`select stats from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task.stats).toMatchObject({
      already_here: 60,
      created: 60,
      source_requests: 1,
      source_tokens: 20,
    });
  });

  it("a held run shorter than a window is left to the window, which finds it held the same way", async () => {
    const { summary, sizes, windows } = await rerunCountingBatches(
      "short",
      (prefix) => rowsOf(100, prefix),
      (all) => all.slice(0, 10),
    );
    expect(summary).toMatchObject({ attempted: 100, created: 90, alreadyHere: 10 });
    // The held rows ride along in the first window, which writes its 50 rows after them.
    expect(sizes).toEqual([50, 40]);
    expect(windows).toBe(2);
  });

  it("a page of held rows with a few to write among them is one window, sized by the rows it writes", async () => {
    // Every row but every 25th is held already (a re-run whose orphans are written again).
    const { summary, sizes, windows, deps } = await rerunCountingBatches(
      "sparse",
      (prefix) => rowsOf(200, prefix),
      (all) => all.filter((_, i) => i % 25 !== 3),
    );
    expect(summary).toMatchObject({ attempted: 200, created: 8, alreadyHere: 192, failed: 0 });
    expect(sizes).toEqual([8]);
    expect(windows).toBe(1);
    const [task] = await h.db.execute<{ processed_offset: number }>(
      sql`select processed_offset from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task!.processed_offset).toBe(200);
  });

  it("builds its writer for the rows not found held, and again for every row when a window must write one outside them", async () => {
    const first = await insertRun(h.db);
    const rows = rowsOf(60, `cover-${first.id.slice(0, 6)}-`);
    const fresh = new Set(rows.filter((_, i) => i % 10 === 5).map((r) => r.sourceId));
    await writeBatches(
      await claimed(first),
      rows.filter((r) => !fresh.has(r.sourceId)),
      companyBatch(first.tenantId, { batches: 0, rows: 0 }),
      { windowSize: 50 },
    );
    await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${first.id}`);

    // A plain re-run: built once, for the six rows it writes.
    const second = await insertRun(h.db, { tenantId: first.tenantId });
    const builtFor: string[][] = [];
    const summary = await writeBatches(
      await claimed(second),
      rows,
      async (toWrite) => {
        builtFor.push(toWrite.map((r) => r.sourceId));
        return companyBatch(first.tenantId, { batches: 0, rows: 0 });
      },
      { windowSize: 50 },
    );
    expect(summary).toMatchObject({ created: 6, alreadyHere: 54 });
    expect(builtFor).toEqual([[...fresh]]);
    await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${second.id}`);

    // A slot let go between the question and the window (a revert, say): that row is written too,
    // by a writer built again for every row.
    const third = await insertRun(h.db, { tenantId: first.tenantId });
    const more = [...rowsOf(2, `cover-more-${first.id.slice(0, 6)}-`), ...rows];
    const rebuilt: number[] = [];
    const again = await writeBatches(
      await claimed(third),
      more,
      async (toWrite) => {
        rebuilt.push(toWrite.length);
        if (rebuilt.length === 1)
          await h.db.execute(sql`
            delete from drover.ledger where tenant_id = ${first.tenantId} and source_id = ${rows[0]!.sourceId}`);
        return companyBatch(first.tenantId, { batches: 0, rows: 0 });
      },
      { windowSize: 50 },
    );
    expect(rebuilt).toEqual([2, 62]);
    expect(again).toMatchObject({ created: 3, alreadyHere: 59 });
  });

  it("a stop lands once a unit's last window moved the cursor to the next unit, not only between windows", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run, { stopRequested: async () => true });
    const calls = { batches: 0, rows: 0 };
    await expect(
      writeBatches(deps, rowsOf(30, `stop-${run.id.slice(0, 6)}-`), companyBatch(run.tenantId, calls), {
        windowSize: 50,
        nextCursor: { deal: 2 },
      }),
    ).rejects.toBeInstanceOf(TaskCancelledError);
    // The unit committed, with the cursor on the next one: a resume starts there.
    expect(calls.batches).toBe(1);
    const task = await one<{ cursor: unknown; processed_offset: number }>(
      sql`select cursor, processed_offset from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task).toEqual({ cursor: { deal: 2 }, processed_offset: 0 });
  });

  it("a fallback checkpoint inside rows of several units records the unit of the next row and the rows of it done", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run);
    const calls = { batches: 0, rows: 0 };
    const batch = companyBatch(run.tenantId, calls);
    // Units of 10 rows; row 45 fails the batch, and the second per-row window dies at row 30.
    const failing: BatchWriter<Company> = {
      writeBatch: batch.writeBatch,
      async writeRow(tx, row, sourceId, held) {
        if (sourceId.endsWith("-30")) throw new TransientError("the database went away");
        return batch.writeRow(tx, row, sourceId, held);
      },
    };
    const positions: number[] = [];
    await expect(
      writeBatches(
        deps,
        rowsOf(60, `units-${run.id.slice(0, 6)}-`, (i) => i === 45),
        failing,
        {
          windowSize: 60,
          nextCursor: { unit: 6 },
          positionAfter: (done) => {
            positions.push(done);
            return { cursor: { unit: Math.floor(done / 10) }, processedOffset: done % 10 };
          },
        },
      ),
    ).rejects.toBeInstanceOf(TransientError);
    // The batch failed whole; the first per-row window (rows 0-24) committed, with its checkpoint
    // in unit 2 after 5 of its rows: a retry resumes at row 25, not at the start of unit 0 or 3.
    const task = await one<{ cursor: unknown; processed_offset: number }>(
      sql`select cursor, processed_offset from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task).toEqual({ cursor: { unit: 2 }, processed_offset: 5 });
    expect(deps.task).toMatchObject({ cursor: { unit: 2 }, processedOffset: 5 });
    expect(positions).toContain(25);
    const ledger = await one<{ n: number }>(
      sql`select count(*)::int as n from drover.ledger where run_id = ${run.id}`,
    );
    expect(ledger.n).toBe(25);
  });

  it("the last window of rows of several units moves the cursor to nextCursor, not to a position inside them", async () => {
    const run = await insertRun(h.db);
    const deps = await claimed(run);
    const calls = { batches: 0, rows: 0 };
    await writeBatches(
      deps,
      rowsOf(30, `units-end-${run.id.slice(0, 6)}-`),
      companyBatch(run.tenantId, calls),
      {
        windowSize: 20,
        nextCursor: { unit: 3 },
        positionAfter: (done) => ({ cursor: { unit: Math.floor(done / 10) }, processedOffset: done % 10 }),
      },
    );
    expect(calls.batches).toBe(2);
    const task = await one<{ cursor: unknown; processed_offset: number }>(
      sql`select cursor, processed_offset from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task).toEqual({ cursor: { unit: 3 }, processed_offset: 0 });
  });
});
