import { randomUUID } from "node:crypto";
import { openDatabase, runs, tasks } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { sources as providers } from "@drover/source-registry";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneRunsPastRetention } from "../src/reaper.js";
import { currentNoteGroups } from "../src/run-outcomes.js";
import { runView } from "../src/run-view.js";
import { testContext } from "./test-context.js";

let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

const PLAN = [["organizations"], ["notes"], ["catch-up"]];

/**
 * A crm run as its tasks leave it, statement by statement in the order the engine writes (each
 * window's ledger claims, notes and stats commit together):
 * - the first pass over organizations created 1, 2 and 3, and found 4 already imported by an earlier run;
 * - the first pass over notes created 10, skipped 11 and 12 as "not linked to any record", failed 13;
 * - the catch-up then created 11 (its parent now known: the skipped slot is taken over) and 13 (fixed
 *   mid-run), applied the edits of organization 1 and note 10 in place (counted "already here" by
 *   the catch-up's tasks), and skipped 12 again.
 * Four organizations and four notes: each source row once.
 */
async function runWithCatchUp(status: "running" | "succeeded" = "succeeded") {
  const tenantId = `t-${randomUUID().slice(0, 8)}`;
  const [run] = await database.db
    .insert(runs)
    .values({
      tenantId,
      source: "crm",
      sourceAccount: "acme",
      kinds: PLAN.flat(),
      plan: PLAN,
      status,
      currentPhase: 3,
      sourceConfig: { baseUrl: "http://127.0.0.1:1", settings: {} },
      finishedAt: status === "succeeded" ? new Date(Date.now() - 100 * 86_400_000) : null,
    })
    .returning();
  const r = run!;
  const task = async (kind: string, phase: number, stats: Record<string, number>) => {
    const [t] = await database.db
      .insert(tasks)
      .values({ runId: r.id, kind, phase, seedKey: randomUUID(), cursor: {}, status: "succeeded", stats })
      .returning();
    return t!.id;
  };
  const slot = (kind: string, id: string, action: string, runId: string, taskId: number | null) =>
    database.db.execute(sql`
      insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, reason, run_id, task_id)
      values (${tenantId}, 'crm', 'acme', ${kind}, ${id}, ${action}, ${action === "skipped" ? null : "x"},
              ${action === "skipped" ? null : 1}, ${action === "skipped" ? "not linked to any record" : null}, ${runId}, ${taskId})
      on conflict (tenant_id, source, source_account, kind, source_id) do update set
        action = excluded.action, record_type = excluded.record_type, record_id = excluded.record_id,
        reason = excluded.reason, run_id = excluded.run_id, task_id = excluded.task_id, updated_at = now()
      where drover.ledger.action = 'skipped'`);
  const note = (taskId: number, level: string, kind: string, id: string, reason: string) =>
    database.db.execute(sql`
      insert into drover.notes (run_id, task_id, level, kind, subject_id, reason)
      values (${r.id}, ${taskId}, ${level}, ${kind}, ${id}, ${reason})`);

  // An earlier run imported organization 4.
  await slot("organizations", "4", "created", randomUUID(), null);

  const orgs = await task("organizations", 0, { created: 3, already_here: 1 });
  for (const id of ["1", "2", "3"]) await slot("organizations", id, "created", r.id, orgs);

  const notes = await task("notes", 1, { created: 1, skipped: 2, failed: 1 });
  await slot("notes", "10", "created", r.id, notes);
  await slot("notes", "11", "skipped", r.id, notes);
  await slot("notes", "12", "skipped", r.id, notes);
  await note(notes, "warn", "notes", "11", "not linked to any record");
  await note(notes, "warn", "notes", "12", "not linked to any record");
  await note(notes, "error", "notes", "13", "update_time is not a date");

  // The catch-up: one chain of tasks, kind after kind, in the closing phase.
  await task("organizations", 2, { already_here: 1 });
  const catchUpNotes = await task("notes", 2, { created: 2, already_here: 1, skipped: 1 });
  await slot("notes", "11", "created", r.id, catchUpNotes);
  await slot("notes", "13", "created", r.id, catchUpNotes);
  await slot("notes", "12", "skipped", r.id, catchUpNotes);
  await note(catchUpNotes, "warn", "notes", "12", "not linked to any record");
  return r;
}

const countsOf = (run: Awaited<ReturnType<typeof runView>>) =>
  Object.fromEntries(
    run.progress.map((p) => [
      p.kind,
      {
        imported: p.imported,
        matched: p.matched,
        alreadyHere: p.alreadyHere,
        skipped: p.skipped,
        failed: p.failed,
      },
    ]),
  );

describe("a run's counts and reasons", () => {
  it("count each source row once, in what it finally became, though the catch-up touched it again", async () => {
    const run = await runWithCatchUp();
    expect(countsOf(await runView(database.db, providers, run))).toEqual({
      organizations: { imported: 3n, matched: 0n, alreadyHere: 1n, skipped: 0n, failed: 0n },
      // 10 and 11 and 13 imported (11 once skipped, 13 once failed), 12 skipped (twice, one row).
      notes: { imported: 3n, matched: 0n, alreadyHere: 0n, skipped: 1n, failed: 0n },
      "catch-up": { imported: 0n, matched: 0n, alreadyHere: 0n, skipped: 0n, failed: 0n },
    });
  });

  it("leave out reasons that no longer hold: a skipped or failed row the catch-up imported", async () => {
    const run = await runWithCatchUp();
    expect(await currentNoteGroups(database.db, providers, run, { samples: 5 })).toEqual([
      {
        level: "warn",
        kind: "notes",
        reason: "not linked to any record",
        count: 1n,
        sampleSubjectIds: ["12"],
      },
    ]);
  });

  it("keep a reason about a row whose slot has not moved since, and one about a row of an earlier run", async () => {
    const run = await runWithCatchUp();
    // A deferred link kept as a source reference is noted after its row was created: still true.
    await database.db.execute(sql`
      insert into drover.notes (run_id, level, kind, subject_id, reason)
      values (${run.id}, 'warn', 'organizations', '2', 'parent 99 is not in the destination')`);
    // Organization 4 fails to parse now; the earlier run's import does not make that untrue.
    await database.db.execute(sql`
      insert into drover.notes (run_id, level, kind, subject_id, reason)
      values (${run.id}, 'error', 'organizations', '4', 'name is not a string')`);
    const reasons = (
      await currentNoteGroups(database.db, providers, run, { samples: 5, kind: "organizations" })
    ).map((g) => [g.level, g.reason, g.count]);
    expect(reasons).toEqual(
      expect.arrayContaining([
        ["warn", "parent 99 is not in the destination", 1n],
        ["error", "name is not a string", 1n],
      ]),
    );
    expect(countsOf(await runView(database.db, providers, run)).organizations!.failed).toBe(1n);
  });

  it("follow a later run that took over a stopped run's skipped row", async () => {
    const run = await runWithCatchUp("running");
    await database.db.execute(
      sql`update drover.runs set status = 'stopped', current_phase = 1 where id = ${run.id}`,
    );
    const [stopped] = await database.db.select().from(runs).where(sql`id = ${run.id}`);
    expect(countsOf(await runView(database.db, providers, stopped!)).notes!.skipped).toBe(1n);
    // The next run of the tenant finds note 12's deal and creates it: the slot is that run's now.
    await database.db.execute(sql`
      update drover.ledger set action = 'created', record_type = 'note', record_id = 12, reason = null,
             run_id = ${randomUUID()}, updated_at = now()
       where tenant_id = ${run.tenantId} and kind = 'notes' and source_id = '12'`);
    expect(countsOf(await runView(database.db, providers, stopped!)).notes!.skipped).toBe(0n);
    expect(await currentNoteGroups(database.db, providers, stopped!, { samples: 5 })).toEqual([]);
  });

  it("are what a pruned run freezes", async () => {
    const run = await runWithCatchUp("succeeded");
    const before = await runView(database.db, providers, run);
    expect(await pruneRunsPastRetention(testContext(database.db))).toBeGreaterThanOrEqual(1);
    const [pruned] = await database.db.select().from(runs).where(sql`id = ${run.id}`);
    expect(pruned!.summary).not.toBeNull();
    const after = await runView(database.db, providers, pruned!);
    expect(after.progress).toEqual(before.progress);
    expect(countsOf(after).notes).toMatchObject({ imported: 3n, skipped: 1n, failed: 0n });
  });
});
