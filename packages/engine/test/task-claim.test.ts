import { openDatabase } from "@drover/db";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimTask } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

describe("fenced claim", () => {
  it("two workers racing to claim one task: exactly one wins, every time", async () => {
    // Two pools, as two worker processes would have: the race is decided by Postgres, not by JS.
    const a = openDatabase(h.testDb.url, { max: 2 });
    const b = openDatabase(h.testDb.url, { max: 2 });
    try {
      const run = await insertRun(h.db);
      for (let i = 0; i < 25; i++) {
        const task = await insertTask(h.db, run.id);
        const [ca, cb] = await Promise.all([
          claimTask(a.db, task.id, "worker-a/1"),
          claimTask(b.db, task.id, "worker-b/1"),
        ]);
        expect([ca, cb].filter(Boolean)).toHaveLength(1);
        const [row] = await h.db.execute<{ attempts: number; locked_by: string }>(
          sql`select attempts, locked_by from drover.tasks where id = ${task.id}`,
        );
        expect(row!.attempts).toBe(1);
        expect(row!.locked_by).toBe((ca ?? cb)!.lockedBy);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a task of a stopping run cannot be claimed", async () => {
    const run = await insertRun(h.db, { status: "stopping" });
    const task = await insertTask(h.db, run.id);
    expect(await claimTask(h.db, task.id, "w/1")).toBeUndefined();
  });

  it("a parked task cannot be claimed before it is due", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id, { availableAt: new Date(Date.now() + 60_000) });
    expect(await claimTask(h.db, task.id, "w/1")).toBeUndefined();
  });
});
