import type { BatchWriter, RowWriter, SourceRow } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeBatches, writeRows } from "../src/index.js";
import { claimedTaskDeps, companyWriter, type Harness, insertRun, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

type Company = { name: string | null };

function rowsOf(n: number, prefix: string): SourceRow<Company>[] {
  return Array.from({ length: n }, (_, i) => ({
    sourceId: `${prefix}${i}`,
    data: { name: `${prefix} ${i}` },
  }));
}

async function count(query: ReturnType<typeof sql>): Promise<number> {
  const [r] = await h.db.execute<{ n: number }>(query);
  return Number(r!.n);
}

const companies = () => count(sql`select count(*) as n from app.companies`);

describe("a dry run's windows", () => {
  it("count every outcome, commit the checkpoint, stats, notes and would-be rows, and write no product row or ledger slot", async () => {
    const run = await insertRun(h.db, { dryRun: true });
    const deps = await claimedTaskDeps(h.db, run);
    const rows = rowsOf(60, "d");
    rows[5] = { sourceId: "d5", data: { rowError: "name is not a string" } };
    rows[9] = { sourceId: "d9", data: { name: null } }; // fails inside its savepoint, as in a real run
    const skipping: RowWriter<Company> = async (tx, row, id, held) =>
      id === "d12"
        ? { action: "skipped", reason: "not linked to any record" }
        : companyWriter(tx, row, id, held);
    const before = await companies();
    const summary = await writeRows(deps, rows, skipping);
    expect(summary).toMatchObject({ attempted: 60, created: 57, skipped: 1, failed: 2 });
    expect(await companies()).toBe(before);
    expect(await count(sql`select count(*) as n from drover.ledger where run_id = ${run.id}`)).toBe(0);
    const [task] = await h.db.execute<{ processed_offset: number; stats: Record<string, number> }>(
      sql`select processed_offset, stats from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task!.processed_offset).toBe(60);
    expect(task!.stats).toMatchObject({ created: 57, skipped: 1, failed: 2 });
    const notes = await h.db.execute<{ subject_id: string; level: string }>(
      sql`select subject_id, level from drover.notes where run_id = ${run.id} order by subject_id`,
    );
    expect(notes.map((n) => `${n.level}:${n.subject_id}`)).toEqual(["warn:d12", "error:d5", "error:d9"]);
    expect(await count(sql`select count(*) as n from drover.dry_run_rows where run_id = ${run.id}`)).toBe(57);
  });

  it("count a row an earlier window of the run would have written as already here, not created twice", async () => {
    const run = await insertRun(h.db, { dryRun: true });
    const first = await claimedTaskDeps(h.db, run);
    expect((await writeRows(first, rowsOf(10, "again"), companyWriter)).created).toBe(10);
    const second = await claimedTaskDeps(h.db, run);
    expect(await writeRows(second, rowsOf(10, "again"), companyWriter)).toMatchObject({
      created: 0,
      alreadyHere: 10,
    });
  });

  it("roll back the batched path too, keeping its outcomes", async () => {
    const run = await insertRun(h.db, { dryRun: true });
    const deps = await claimedTaskDeps(h.db, run);
    const batch: BatchWriter<Company> = {
      writeRow: companyWriter,
      async writeBatch(tx, rows) {
        return Promise.all(rows.map((r) => companyWriter(tx, r.data, r.sourceId)));
      },
    };
    const before = await companies();
    expect(await writeBatches(deps, rowsOf(120, "b"), batch, { windowSize: 50 })).toMatchObject({
      created: 120,
    });
    expect(await companies()).toBe(before);
    expect(await count(sql`select count(*) as n from drover.ledger where run_id = ${run.id}`)).toBe(0);
    expect(await count(sql`select count(*) as n from drover.dry_run_rows where run_id = ${run.id}`)).toBe(
      120,
    );
  });

  it("leave a real run's windows as they were: written and claimed", async () => {
    const run = await insertRun(h.db);
    const deps = await claimedTaskDeps(h.db, run);
    const before = await companies();
    expect((await writeRows(deps, rowsOf(30, "real"), companyWriter)).created).toBe(30);
    expect(await companies()).toBe(before + 30);
    expect(await count(sql`select count(*) as n from drover.ledger where run_id = ${run.id}`)).toBe(30);
    expect(await count(sql`select count(*) as n from drover.dry_run_rows where run_id = ${run.id}`)).toBe(0);
  });
});
