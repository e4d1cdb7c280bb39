import type { Tx } from "@drover/db";
import { claimLedgerSlot } from "@drover/ledger";
import type { BatchWriter, SourceRow } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
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
  });

  it("without a ledger a clean window is one batch too: no claim, no fallback", async () => {
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
    const deps = await claimed(second);
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
    const task = await one<{ cursor: unknown; processed_offset: number; stats: Record<string, number> }>(
      sql`select cursor, processed_offset, stats from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task).toMatchObject({ cursor: { page: 1 }, processed_offset: 0, stats: { already_here: 120 } });
    expect(deps.task).toMatchObject({ cursor: { page: 1 }, processedOffset: 0 });
    // One checkpoint for the page, where its three windows would each have committed one.
    const windows = await one<{ n: number; rows: number }>(
      sql`select count(*)::int as n, sum(rows)::int as rows from drover.window_commits where task_id = ${deps.task.id}`,
    );
    expect(windows).toEqual({ n: 1, rows: 120 });
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
    const deps = await claimed(second);
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
  });

  it("a held run shorter than a window is left to the window, which finds it held the same way", async () => {
    const first = await insertRun(h.db);
    const rows = rowsOf(100, `short-${first.id.slice(0, 6)}-`);
    await writeBatches(
      await claimed(first),
      rows.slice(0, 10),
      companyBatch(first.tenantId, { batches: 0, rows: 0 }),
      { windowSize: 50 },
    );
    await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${first.id}`);
    const second = await insertRun(h.db, { tenantId: first.tenantId });
    const deps = await claimed(second);
    const sizes: number[] = [];
    const batch = companyBatch(first.tenantId, { batches: 0, rows: 0 });
    const summary = await writeBatches(
      deps,
      rows,
      {
        writeRow: batch.writeRow,
        writeBatch: (tx, r) => {
          sizes.push(r.length);
          return batch.writeBatch(tx, r);
        },
      },
      { windowSize: 50 },
    );
    expect(summary).toMatchObject({ attempted: 100, created: 90, alreadyHere: 10 });
    expect(sizes).toEqual([40, 50]);
    const windows = await one<{ n: number }>(
      sql`select count(*)::int as n from drover.window_commits where task_id = ${deps.task.id}`,
    );
    expect(windows.n).toBe(2);
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
});
