import type { Provider } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAssignment } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

const quick: Provider = {
  name: "test",
  phases: [["companies"]],
  validateConfig: () => undefined,
  seedPhase: async () => [],
  runTask: async () => ({}),
};

/** The transaction that last wrote the run's row: it changes with every write, whatever the columns. */
async function lastWriter(runId: string): Promise<string> {
  const [row] = await h.db.execute<{ xmin: string }>(
    sql`select xmin::text as xmin from drover.runs where id = ${runId}::uuid`,
  );
  return row!.xmin;
}

describe("the run's row", () => {
  it("is not written when one of its tasks ends: fifty workers finishing tasks do not queue on it", async () => {
    const run = await insertRun(h.db);
    const tasks = [await insertTask(h.db, run.id), await insertTask(h.db, run.id)];
    const before = await lastWriter(run.id);
    for (const task of tasks) {
      const outcome = await runAssignment(
        { db: h.db, providers: new Map([["test", quick]]), workerId: "w", maxAttempts: 3, notesCap: 10 },
        task.id,
        { shutdown: new AbortController().signal, working: () => {} },
      );
      expect(outcome.status).toBe("succeeded");
    }
    expect(await lastWriter(run.id)).toBe(before);
  });
});
