import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimTask, markTasksDispatched, runDemand } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

async function demandOf(runId: string, readyLimit = 100) {
  return (await runDemand(h.db, readyLimit)).find((d) => d.runId === runId);
}

describe("a dispatch round's demand", () => {
  it("counts running and published tasks as in flight, and as ready only what a mark would publish", async () => {
    const run = await insertRun(h.db, { plan: [["companies"], ["contacts"]] });
    await claimTask(h.db, (await insertTask(h.db, run.id)).id, "w/1");
    await insertTask(h.db, run.id, { dispatchedAt: new Date() });
    await insertTask(h.db, run.id);
    await insertTask(h.db, run.id);
    // Not dispatchable: not due yet, of a later phase, ended.
    await insertTask(h.db, run.id, { availableAt: new Date(Date.now() + 60_000) });
    await insertTask(h.db, run.id, { phase: 1 });
    await insertTask(h.db, run.id, { status: "succeeded" });

    expect(await demandOf(run.id)).toMatchObject({ running: 1, queued: 1, ready: 2, present: true });
    expect((await demandOf(run.id, 1))?.ready).toBe(1);
    // The deficit under 10 in flight is 8, but only the 2 ready tasks are there to mark.
    expect((await markTasksDispatched(h.db, run.id, 10)).ids).toHaveLength(2);
    expect(await demandOf(run.id)).toMatchObject({ running: 1, queued: 3, ready: 0 });
  });

  it("leaves out runs that are not running, and counts a run parked for hours as not present", async () => {
    const stopping = await insertRun(h.db, { status: "stopping" });
    await insertTask(h.db, stopping.id);
    expect(await demandOf(stopping.id)).toBeUndefined();

    const parked = await insertRun(h.db);
    await insertTask(h.db, parked.id, { availableAt: new Date(Date.now() + 3_600_000) });
    await h.db.execute(
      sql`update drover.runs set updated_at = now() - interval '1 minute' where id = ${parked.id}::uuid`,
    );
    expect(await demandOf(parked.id)).toMatchObject({ running: 0, queued: 0, ready: 0, present: false });
  });
});
