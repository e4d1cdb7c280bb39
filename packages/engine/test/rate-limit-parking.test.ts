import { type Provider, RateLimitedError } from "@drover/provider-sdk";
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

const resetAt = new Date(Date.now() + 120_000);
const walled: Provider = {
  name: "test",
  phases: [["companies"]],
  validateConfig: () => undefined,
  seedPhase: async () => [],
  runTask: async () => {
    throw new RateLimitedError("rate limited (429)", resetAt);
  },
};

describe("a 429", () => {
  it("parks the task until the reset without spending an attempt, and parks its account's siblings too", async () => {
    const run = await insertRun(h.db, { sourceAccount: "walled", tenantId: "t-a" });
    const otherRunSameAccount = await insertRun(h.db, { sourceAccount: "walled", tenantId: "t-b" });
    const otherAccount = await insertRun(h.db, { sourceAccount: "elsewhere", tenantId: "t-c" });
    const task = await insertTask(h.db, run.id);
    const sibling = await insertTask(h.db, run.id);
    const cousin = await insertTask(h.db, otherRunSameAccount.id);
    const stranger = await insertTask(h.db, otherAccount.id);

    const outcome = await runAssignment(
      { db: h.db, providers: new Map([["test", walled]]), workerId: "w", maxAttempts: 3, notesCap: 10 },
      task.id,
      { shutdown: new AbortController().signal, working: () => {} },
    );
    expect(outcome.status).toBe("parked");
    const rows = await h.db.execute<{ id: string; status: string; attempts: number; parked: boolean }>(sql`
      select id, status, attempts, available_at >= ${resetAt.toISOString()}::timestamptz - interval '1 second' as parked
        from drover.tasks where id in (${task.id}, ${sibling.id}, ${cousin.id}, ${stranger.id}) order by id`);
    expect(rows.map((r) => [Number(r.id), r.status, r.attempts, r.parked])).toEqual([
      [task.id, "pending", 0, true],
      [sibling.id, "pending", 0, true],
      [cousin.id, "pending", 0, true],
      [stranger.id, "pending", 0, false],
    ]);
  });
});
