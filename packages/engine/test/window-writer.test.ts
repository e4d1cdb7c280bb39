import { type RowWriter, type SourceRow, TransientError } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimTask, handBackTask, LostClaimError, writeRows } from "../src/index.js";
import { claimedTaskDeps, companyWriter, type Harness, insertRun, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

type Company = { name: string | null };

function rowsOf(n: number, prefix = "c"): SourceRow<Company>[] {
  return Array.from({ length: n }, (_, i) => ({
    sourceId: `${prefix}${i}`,
    data: { name: `${prefix} ${i}` },
  }));
}

const claimedTask = (run: Awaited<ReturnType<typeof insertRun>>) => claimedTaskDeps(h.db, run);

async function finish(runId: string): Promise<void> {
  await h.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${runId}`);
}

async function count(query: ReturnType<typeof sql>): Promise<number> {
  const [r] = await h.db.execute<{ n: number }>(query);
  return Number(r!.n);
}

describe("windows", () => {
  it("a window that fails part-way leaves the checkpoint at the last committed window", async () => {
    const run = await insertRun(h.db);
    const deps = await claimedTask(run);
    const rows = rowsOf(80, `w${run.id.slice(0, 4)}-`);
    let written = 0;
    const failing: RowWriter<Company> = async (tx, row, id) => {
      if (written++ === 60) throw new TransientError("connection reset");
      return companyWriter(tx, row, id);
    };
    await expect(writeRows(deps, rows, failing)).rejects.toBeInstanceOf(TransientError);
    const [task] = await h.db.execute<{ processed_offset: number; stats: Record<string, number> }>(
      sql`select processed_offset, stats from drover.tasks where id = ${deps.task.id}`,
    );
    expect(task!.processed_offset).toBe(50);
    expect(task!.stats.created).toBe(50);
    expect(await count(sql`select count(*) as n from drover.ledger where run_id = ${run.id}`)).toBe(50);

    // The retry resumes at the checkpoint and writes exactly the rest.
    const summary = await writeRows(deps, rows, companyWriter);
    expect(summary.created).toBe(30);
    expect(await count(sql`select count(*) as n from drover.ledger where run_id = ${run.id}`)).toBe(80);
  });

  it("a second writer of a created row rolls back its own write and reports already-here", async () => {
    const tenantId = "tenant-dup";
    const first = await insertRun(h.db, { tenantId });
    const rows = rowsOf(30, "dup");
    const before = await count(sql`select count(*) as n from app.companies`);
    expect((await writeRows(await claimedTask(first), rows, companyWriter)).created).toBe(30);
    await finish(first.id);
    const second = await insertRun(h.db, { tenantId });
    const again = await writeRows(await claimedTask(second), rows, companyWriter);
    expect(again).toMatchObject({ created: 0, alreadyHere: 30 });
    expect(await count(sql`select count(*) as n from app.companies`)).toBe(before + 30);
  });

  it("a skipped placeholder is taken over by a later attempt that does better", async () => {
    const tenantId = "tenant-skip";
    const runA = await insertRun(h.db, { tenantId });
    const skipper: RowWriter<Company> = async () => ({
      action: "skipped",
      reason: "not linked to any record",
    });
    expect((await writeRows(await claimedTask(runA), rowsOf(5, "s"), skipper)).skipped).toBe(5);
    await finish(runA.id);
    const runB = await insertRun(h.db, { tenantId });
    expect((await writeRows(await claimedTask(runB), rowsOf(5, "s"), companyWriter)).created).toBe(5);
    const actions = await h.db.execute<{ action: string; n: number }>(sql`
      select action, count(*)::int as n from drover.ledger where tenant_id = ${tenantId} group by action`);
    expect([...actions]).toEqual([{ action: "created", n: 5 }]);
    await finish(runB.id);
    // And the reverse never happens: a skip cannot displace a created slot.
    const runC = await insertRun(h.db, { tenantId });
    expect((await writeRows(await claimedTask(runC), rowsOf(5, "s"), skipper)).alreadyHere).toBe(5);
  });

  it("a malformed row loses only itself and is noted", async () => {
    const run = await insertRun(h.db);
    const deps = await claimedTask(run);
    const rows: SourceRow<Company>[] = rowsOf(10, "m");
    rows[3] = { sourceId: "m3", data: { rowError: "name is not a string" } };
    rows[7] = { sourceId: "m7", data: { name: null } }; // violates NOT NULL inside its savepoint
    const summary = await writeRows(deps, rows, companyWriter);
    expect(summary).toMatchObject({ attempted: 10, created: 8, failed: 2 });
    const notes = await h.db.execute<{ subject_id: string; reason: string }>(
      sql`select subject_id, reason from drover.notes where run_id = ${run.id} and level = 'error' order by subject_id`,
    );
    expect(notes.map((n) => n.subject_id)).toEqual(["m3", "m7"]);
    expect(notes[1]!.reason).toMatch(/null value.*23502/);
  });

  it("a worker that lost its claim commits nothing", async () => {
    const run = await insertRun(h.db);
    const deps = await claimedTask(run);
    // The reaper (or a shutdown) handed the task back, and another attempt now owns it.
    await handBackTask(h.db, deps.task.id, deps.claimToken);
    await claimTask(h.db, deps.task.id, "other/1");
    const before = await count(sql`select count(*) as n from app.companies`);
    await expect(writeRows(deps, rowsOf(10, "z"), companyWriter)).rejects.toBeInstanceOf(LostClaimError);
    expect(await count(sql`select count(*) as n from app.companies`)).toBe(before);
    expect(await count(sql`select count(*) as n from drover.ledger where run_id = ${run.id}`)).toBe(0);
  });

  it("the cursor moves on with the last window of a position", async () => {
    const run = await insertRun(h.db);
    const deps = await claimedTask(run);
    await writeRows(deps, rowsOf(30, "cur"), companyWriter, { nextCursor: { deal: 2 } });
    await writeRows(deps, [], companyWriter as RowWriter<Company>, { nextCursor: { deal: 3 } });
    const [t] = await h.db.execute<{ cursor: unknown; processed_offset: number }>(
      sql`select cursor, processed_offset from drover.tasks where id = ${deps.task.id}`,
    );
    expect(t).toEqual({ cursor: { deal: 3 }, processed_offset: 0 });
    expect(deps.task.cursor).toEqual({ deal: 3 });
  });
});
