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

describe("the database going away under a task", () => {
  it("hands the task back with its attempt once the server answers, rather than spending an attempt", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    // What a fast shutdown or a restart does to every session: ended with admin_shutdown (57P01).
    const restarted: Provider = {
      name: "test",
      phases: [["companies"]],
      validateConfig: () => undefined,
      seedPhase: async () => [],
      async runTask(ctx) {
        await ctx.writeRows([{ sourceId: "a", data: {} }], async (tx) => {
          await tx.execute(sql`select pg_terminate_backend(pg_backend_pid())`);
          return { action: "skipped", reason: "unreachable" };
        });
        return {};
      },
    };
    const outcome = await runAssignment(
      { db: h.db, providers: new Map([["test", restarted]]), workerId: "w", maxAttempts: 3, notesCap: 10 },
      task.id,
      { shutdown: new AbortController().signal, working: () => {} },
    );
    expect(outcome.status).toBe("handed_back");
    const [row] = await h.db.execute<{ status: string; attempts: number }>(sql`
      select status, attempts from drover.tasks where id = ${task.id}`);
    expect(row).toEqual({ status: "pending", attempts: 0 });
  });
});
