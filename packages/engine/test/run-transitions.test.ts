import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cancelPendingTasksOfRun,
  claimTask,
  markTasksDispatched,
  rearmRun,
  redriveRun,
  requestStop,
} from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

async function statuses(runId: string) {
  const [run] = await h.db.execute<{ status: string; current_phase: number }>(
    sql`select status, current_phase from drover.runs where id = ${runId}::uuid`,
  );
  const tasks = await h.db.execute<{ status: string }>(
    sql`select status from drover.tasks where run_id = ${runId}::uuid order by id`,
  );
  return { run: run!.status, phase: run!.current_phase, tasks: tasks.map((t) => t.status) };
}

describe("a stop", () => {
  it("makes the run stopping and cancels its pending tasks, leaving the running ones to see it", async () => {
    const run = await insertRun(h.db);
    await insertTask(h.db, run.id);
    const running = await insertTask(h.db, run.id);
    await claimTask(h.db, running.id, "w/1");
    expect(await requestStop(h.db, run.id)).toBe(true);
    expect(await statuses(run.id)).toMatchObject({ run: "stopping", tasks: ["cancelled", "running"] });
    // Already stopping: nothing moves twice.
    expect(await requestStop(h.db, run.id)).toBe(false);
  });

  it("cancels nothing of a run that is not stopping", async () => {
    const run = await insertRun(h.db);
    await insertTask(h.db, run.id);
    expect(await cancelPendingTasksOfRun(h.db, run.id)).toBe(0);
    expect(await statuses(run.id)).toMatchObject({ run: "running", tasks: ["pending"] });
  });
});

describe("a resume or retry", () => {
  const RESUME = { from: "stopped", tasksFrom: "cancelled", resetAttempts: false } as const;
  const RETRY = { from: "failed", tasksFrom: "failed", resetAttempts: true } as const;

  it("makes the run running, its tasks pending, and rewinds the barrier to the lowest of them", async () => {
    const run = await insertRun(h.db, {
      status: "failed",
      plan: [["companies"], ["contacts"], ["deals"]],
      currentPhase: 3,
      finishedAt: new Date(),
      error: "1 task(s) failed",
    });
    await insertTask(h.db, run.id, { phase: 0, status: "succeeded" });
    await insertTask(h.db, run.id, { phase: 1, status: "failed", attempts: 8 });
    await insertTask(h.db, run.id, { phase: 2, status: "failed", attempts: 2 });
    expect(await rearmRun(h.db, run.id, RETRY)).toBe(true);
    expect(await statuses(run.id)).toEqual({
      run: "running",
      phase: 1,
      tasks: ["succeeded", "pending", "pending"],
    });
    const [row] = await h.db.execute<{ error: string | null; attempts: number }>(sql`
      select r.error, max(t.attempts)::int as attempts from drover.runs r join drover.tasks t on t.run_id = r.id
       where r.id = ${run.id}::uuid group by r.error`);
    expect(row).toEqual({ error: null, attempts: 0 });
  });

  it("moves the run once when two race, and never a run in another status or a pruned one", async () => {
    const run = await insertRun(h.db, { status: "stopped", finishedAt: new Date() });
    await insertTask(h.db, run.id, { status: "cancelled" });
    const results = await Promise.all([rearmRun(h.db, run.id, RESUME), rearmRun(h.db, run.id, RESUME)]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await statuses(run.id)).toMatchObject({ run: "running", tasks: ["pending"] });

    const failed = await insertRun(h.db, { status: "failed", finishedAt: new Date() });
    expect(await rearmRun(h.db, failed.id, RESUME)).toBe(false);
    const pruned = await insertRun(h.db, {
      status: "failed",
      finishedAt: new Date(),
      summary: { kinds: {}, tasks: {} },
    });
    expect(await rearmRun(h.db, pruned.id, RETRY)).toBe(false);
    expect((await statuses(pruned.id)).run).toBe("failed");
  });
});

describe("a re-drive", () => {
  const seeds = (key: string) => [
    { kind: "contacts", seedKey: `redrive:${key}:contacts:0`, cursor: { redrive: ["7", "9"] } },
  ];

  it("makes a finished run running with the re-drive's tasks in its last phase, its failed tasks left failed", async () => {
    const run = await insertRun(h.db, {
      status: "failed",
      plan: [["companies"], ["contacts"], ["deals"]],
      currentPhase: 3,
      finishedAt: new Date(),
      error: "1 task(s) failed",
    });
    await insertTask(h.db, run.id, { phase: 0, status: "succeeded" });
    await insertTask(h.db, run.id, { phase: 1, status: "failed" });
    expect(await redriveRun(h.db, run.id, seeds("a"))).toBe(true);
    expect(await statuses(run.id)).toEqual({
      run: "running",
      phase: 2,
      tasks: ["succeeded", "failed", "pending"],
    });
    const [task] = await h.db.execute<{ kind: string; phase: number; cursor: unknown }>(sql`
      select kind, phase, cursor from drover.tasks where run_id = ${run.id}::uuid and seed_key like 'redrive:%'`);
    expect(task).toEqual({ kind: "contacts", phase: 2, cursor: { redrive: ["7", "9"] } });
  });

  it("moves a finished run once when two race, and never a live, stopped or pruned one", async () => {
    const run = await insertRun(h.db, { status: "succeeded", currentPhase: 1, finishedAt: new Date() });
    const results = await Promise.all([
      redriveRun(h.db, run.id, seeds("a")),
      redriveRun(h.db, run.id, seeds("b")),
    ]);
    expect(results.filter(Boolean)).toHaveLength(1);
    // The loser's seeds were never written.
    expect((await statuses(run.id)).tasks).toEqual(["pending"]);

    for (const status of ["running", "stopped"] as const) {
      const other = await insertRun(h.db, { status });
      expect(await redriveRun(h.db, other.id, seeds("c"))).toBe(false);
      expect(await statuses(other.id)).toMatchObject({ run: status, tasks: [] });
    }
    const pruned = await insertRun(h.db, {
      status: "succeeded",
      finishedAt: new Date(),
      summary: { kinds: {}, tasks: {} },
    });
    expect(await redriveRun(h.db, pruned.id, seeds("d"))).toBe(false);
  });
});

describe("dispatch marks", () => {
  it("mark at most the run's deficit of due tasks of its current phase, counting those in flight", async () => {
    const run = await insertRun(h.db, { plan: [["companies"], ["contacts"]] });
    const inFlight = await insertTask(h.db, run.id);
    await claimTask(h.db, inFlight.id, "w/1");
    const due = [
      await insertTask(h.db, run.id),
      await insertTask(h.db, run.id),
      await insertTask(h.db, run.id),
    ];
    await insertTask(h.db, run.id, { availableAt: new Date(Date.now() + 60_000) });
    await insertTask(h.db, run.id, { phase: 1 });
    const picked = await markTasksDispatched(h.db, run.id, 3);
    expect(picked.ids).toEqual([due[0]!.id, due[1]!.id]);
    expect((await markTasksDispatched(h.db, run.id, 3)).ids).toEqual([]);
  });
});
