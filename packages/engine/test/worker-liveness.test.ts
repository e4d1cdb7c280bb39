import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  claimTask,
  DeadWorkerError,
  heartbeatWorker,
  LostClaimError,
  liveLaneSlots,
  registerWorker,
  releaseTasksOfDeadWorkers,
  removeWorker,
  writeCheckpoint,
} from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

/** Ends a record's life now, as a worker frozen past its liveness timeout would. */
async function expire(id: string): Promise<void> {
  await h.db.execute(
    sql`update drover.workers set expires_at = now() - interval '1 millisecond' where id = ${id}::uuid`,
  );
}

async function taskRow(id: number) {
  const [row] = await h.db.execute<{ status: string; locked_by: string | null; worker: string | null }>(
    sql`select status, locked_by, worker from drover.tasks where id = ${id}`,
  );
  return row!;
}

async function newWorker(name: string, livenessMs = 60_000): Promise<string> {
  const id = randomUUID();
  await registerWorker(h.db, { id, workerId: name, laneWidth: 4, livenessMs });
  return id;
}

describe("worker liveness", () => {
  it("a heartbeat keeps a record alive, and never revives one that expired", async () => {
    const id = await newWorker("beating");
    expect(await heartbeatWorker(h.db, id, 60_000)).toBe(true);
    await expire(id);
    expect(await heartbeatWorker(h.db, id, 60_000)).toBe(false);
    const [row] = await h.db.execute<{ alive: boolean }>(
      sql`select expires_at > now() as alive from drover.workers where id = ${id}::uuid`,
    );
    expect(row!.alive).toBe(false);
    expect(await heartbeatWorker(h.db, randomUUID(), 60_000)).toBe(false);
  });

  it("a claim names the claimer's live record; under an expired record it is refused and the task stays pending", async () => {
    const run = await insertRun(h.db);
    const alive = await newWorker("claimer");
    const first = await insertTask(h.db, run.id);
    expect((await claimTask(h.db, first.id, "claimer/1", alive))?.worker).toBe(alive);

    await expire(alive);
    const second = await insertTask(h.db, run.id);
    await expect(claimTask(h.db, second.id, "claimer/2", alive)).rejects.toBeInstanceOf(DeadWorkerError);
    expect(await taskRow(second.id)).toMatchObject({ status: "pending", locked_by: null });
    // A task someone else holds is still just "not claimed", whatever the claimer's record.
    const other = await newWorker("other");
    expect(await claimTask(h.db, first.id, "other/1", other)).toBeUndefined();
  });

  it("the reaper releases a dead worker's tasks at once; the worker's late window is refused by the fence", async () => {
    const run = await insertRun(h.db);
    const dead = await newWorker("frozen");
    const live = await newWorker("slow");
    const held = await insertTask(h.db, run.id);
    const kept = await insertTask(h.db, run.id);
    await claimTask(h.db, held.id, "frozen/1", dead);
    await claimTask(h.db, kept.id, "slow/1", live);

    // Not yet expired: nothing is taken, however long the worker has been quiet within its timeout.
    await releaseTasksOfDeadWorkers(h.db, { maxAttempts: 8 });
    expect(await taskRow(held.id)).toMatchObject({ status: "running", locked_by: "frozen/1" });

    await expire(dead);
    const report = await releaseTasksOfDeadWorkers(h.db, { maxAttempts: 8 });
    expect(report).toEqual({ released: 1, failed: 0, deadWorkers: ["frozen"] });
    expect(await taskRow(held.id)).toMatchObject({ status: "pending", locked_by: null });
    expect(await taskRow(kept.id)).toMatchObject({ status: "running", locked_by: "slow/1" });

    // The frozen worker thaws: its window's checkpoint, its heartbeat and its next claim all fail.
    await expect(
      h.db.transaction((tx) =>
        writeCheckpoint(tx, held.id, "frozen/1", { processedOffset: 25, statsDelta: {} }),
      ),
    ).rejects.toBeInstanceOf(LostClaimError);
    expect(await heartbeatWorker(h.db, dead, 60_000)).toBe(false);
    await expect(claimTask(h.db, held.id, "frozen/2", dead)).rejects.toBeInstanceOf(DeadWorkerError);
    // Another worker resumes it.
    expect((await claimTask(h.db, held.id, "slow/2", live))?.attempts).toBe(2);
  });

  it("a task whose worker removed its record (drained, hand-back failed) is released at the next pass", async () => {
    const run = await insertRun(h.db);
    const gone = await newWorker("drained");
    const t = await insertTask(h.db, run.id);
    await claimTask(h.db, t.id, "drained/1", gone);
    expect(await removeWorker(h.db, gone)).toBe(true);
    expect((await releaseTasksOfDeadWorkers(h.db, { maxAttempts: 8 })).released).toBe(1);
    expect(await taskRow(t.id)).toMatchObject({ status: "pending" });
  });

  it("a task whose dead worker has used its attempts fails instead of looping", async () => {
    const run = await insertRun(h.db);
    const dead = await newWorker("poison");
    const t = await insertTask(h.db, run.id, { attempts: 2, attemptsSinceProgress: 2 });
    await claimTask(h.db, t.id, "poison/1", dead);
    await expire(dead);
    expect(await releaseTasksOfDeadWorkers(h.db, { maxAttempts: 3 })).toMatchObject({
      released: 0,
      failed: 1,
    });
    expect(await taskRow(t.id)).toMatchObject({ status: "failed" });
  });

  it("a task whose workers die after each window it commits is not given up: the reaper counts attempts from its last progress", async () => {
    const run = await insertRun(h.db);
    const t = await insertTask(h.db, run.id);
    // Five workers in turn, each killed after committing a window: far past three attempts in all.
    for (let i = 1; i <= 5; i++) {
      const worker = await newWorker(`restarted-${i}`);
      const claimed = await claimTask(h.db, t.id, `restarted-${i}/1`, worker);
      // Every attempt still counts as one (the API's, the traces'); the reaper's count starts over.
      expect(claimed?.attempts, `claim ${i}`).toBe(i);
      await h.db.transaction((tx) =>
        writeCheckpoint(tx, t.id, `restarted-${i}/1`, { processedOffset: i * 100, statsDelta: {} }),
      );
      await expire(worker);
      expect(await releaseTasksOfDeadWorkers(h.db, { maxAttempts: 3 })).toMatchObject({
        released: 1,
        failed: 0,
      });
    }
    expect(await taskRow(t.id)).toMatchObject({ status: "pending" });
    // Without progress it is the task that kills its worker: its attempts run out as before.
    for (let i = 1; i <= 3; i++) {
      const worker = await newWorker(`stuck-${i}`);
      await claimTask(h.db, t.id, `stuck-${i}/1`, worker);
      await expire(worker);
      await releaseTasksOfDeadWorkers(h.db, { maxAttempts: 3 });
    }
    expect(await taskRow(t.id)).toMatchObject({ status: "failed" });
  });

  it("the pool's lane slots count only live records", async () => {
    await h.db.execute(sql`delete from drover.workers`);
    await newWorker("a");
    await registerWorker(h.db, { id: randomUUID(), workerId: "wide", laneWidth: 8, livenessMs: 60_000 });
    await expire(await newWorker("dead"));
    expect(await liveLaneSlots(h.db)).toEqual({ workers: 2, slots: 12, busy: false });
  });
});
