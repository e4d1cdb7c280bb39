import { openDatabase } from "@drover/db";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readRunFact, settleRunFact } from "../src/index.js";
import { appendNoteOnce } from "../src/notes.js";
import { keptCursors } from "../src/run-facts.js";
import { type Harness, insertRun, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("run facts", () => {
  it("two tasks settling one fact at once both get the first writer's value, every time", async () => {
    const a = openDatabase(h.testDb.url, { max: 2 });
    const b = openDatabase(h.testDb.url, { max: 2 });
    try {
      for (let i = 0; i < 20; i++) {
        const run = await insertRun(h.db);
        expect(await readRunFact(h.db, run.id, "crm.mail.bodies")).toBeUndefined();
        const [x, y] = await Promise.all([
          settleRunFact(a.db, run.id, "crm.mail.bodies", "list"),
          settleRunFact(b.db, run.id, "crm.mail.bodies", "fetch"),
        ]);
        expect(x).toBe(y);
        expect(await readRunFact(h.db, run.id, "crm.mail.bodies")).toBe(x);
        // Settled: a later, different finding does not change it.
        expect(await settleRunFact(h.db, run.id, "crm.mail.bodies", x === "list" ? "fetch" : "list")).toBe(x);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe("what a run's tasks keep for later ones", () => {
  it("is the cursors of the run's tasks of a kind that carry the key, oldest task first", async () => {
    const run = await insertRun(h.db);
    const other = await insertRun(h.db);
    const task = (runId: string, kind: string, key: string, cursor: unknown) =>
      h.db.execute(sql`insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
                       values (${runId}::uuid, ${kind}, 0, ${key}, ${JSON.stringify(cursor)}::jsonb)`);
    await task(run.id, "mail", "a", { deals: ["1"], expected: [2] });
    await task(run.id, "mail", "b", { deals: ["1"], index: 0 });
    await task(run.id, "deals", "c", { expected: [9] });
    await task(other.id, "mail", "d", { deals: ["1"], expected: [7] });
    await task(run.id, "mail", "e", { deals: ["1"], expected: [3] });
    expect(await keptCursors(h.db, run.id, "mail", "expected")).toEqual([
      { deals: ["1"], expected: [2] },
      { deals: ["1"], expected: [3] },
    ]);
  });
});

describe("a note said once", () => {
  it("is written once per run, kind, subject and reason, however often a task says it", async () => {
    const run = await insertRun(h.db);
    const note = { level: "info" as const, kind: "mail", subjectId: null, reason: "the count is unknown" };
    await appendNoteOnce(h.db, run.id, null, note);
    await appendNoteOnce(h.db, run.id, null, note);
    await appendNoteOnce(h.db, run.id, null, { ...note, subjectId: "7" });
    await appendNoteOnce(h.db, run.id, null, { ...note, subjectId: "7" });
    const rows = await h.db.execute<{ subject_id: string | null }>(
      sql`select subject_id from drover.notes where run_id = ${run.id}::uuid order by subject_id nulls first`,
    );
    expect(rows.map((r) => r.subject_id)).toEqual([null, "7"]);
  });
});
