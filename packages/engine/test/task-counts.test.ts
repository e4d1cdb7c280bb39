import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { taskCountsByKind, taskCountsByStatus, taskTallies, unfinishedKindTasks } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

describe("a run's task counts", () => {
  it("count succeeded, failed and cancelled tasks as done, per kind and per status", async () => {
    const run = await insertRun(h.db);
    for (const status of ["pending", "running", "succeeded", "failed", "cancelled"] as const)
      await insertTask(h.db, run.id, { status });
    await insertTask(h.db, run.id, { kind: "deals", status: "succeeded" });
    expect(await taskCountsByKind(h.db, run.id)).toEqual(
      new Map([
        ["companies", { total: 5, done: 3, running: 1 }],
        ["deals", { total: 1, done: 1, running: 0 }],
      ]),
    );
    expect(await taskCountsByStatus(h.db, run.id)).toEqual({
      pending: 1,
      running: 1,
      succeeded: 2,
      failed: 1,
      cancelled: 1,
    });
  });

  it("tally for an estimate only the tasks still to run, running or succeeded, per cursor", async () => {
    const run = await insertRun(h.db);
    await insertTask(h.db, run.id, { cursor: { page: 1 } });
    await insertTask(h.db, run.id, { cursor: { page: 1 } });
    await insertTask(h.db, run.id, { cursor: { page: 2 }, status: "succeeded" });
    await insertTask(h.db, run.id, { status: "failed" });
    await insertTask(h.db, run.id, { status: "cancelled" });
    const tallies = await taskTallies(h.db, run.id);
    expect(tallies.sort((a, b) => a.status.localeCompare(b.status))).toEqual([
      { kind: "companies", status: "pending", cursor: { page: 1 }, n: 2 },
      { kind: "companies", status: "succeeded", cursor: { page: 2 }, n: 1 },
    ]);
  });

  it("explain a kind not read in full by a failed task first, then a cancelled one, then an open one", async () => {
    const run = await insertRun(h.db);
    await insertTask(h.db, run.id, { status: "succeeded" });
    expect(await unfinishedKindTasks(h.db, run.id, "companies")).toBeUndefined();
    await insertTask(h.db, run.id, { status: "pending" });
    expect(await unfinishedKindTasks(h.db, run.id, "companies")).toMatchObject({ status: "pending", n: 1 });
    await insertTask(h.db, run.id, { status: "cancelled" });
    expect(await unfinishedKindTasks(h.db, run.id, "companies")).toMatchObject({ status: "cancelled" });
    await insertTask(h.db, run.id, { status: "failed", lastError: "boom" });
    await insertTask(h.db, run.id, { status: "failed", lastError: "boom" });
    expect(await unfinishedKindTasks(h.db, run.id, "companies")).toEqual({
      status: "failed",
      n: 2,
      lastError: "boom",
    });
  });
});
