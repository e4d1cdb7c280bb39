import { openDatabase, type RunFollow } from "@drover/db";
import type { SeedContext } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  claimTask,
  finishTaskSucceeded,
  progressRun,
  rearmRun,
  requestCutover,
  requestStop,
  settleStoppingRun,
} from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness, testProvider } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness(5);
});
afterAll(async () => {
  await h.close();
});

/** A provider whose closing phase seeds one task per pass, recording the pass it was asked for. */
function passProvider(asked: SeedContext["pass"][]) {
  const provider = testProvider(() => []);
  provider.seedPhase = async (ctx) => {
    asked.push(ctx.pass);
    return [{ kind: "contacts", seedKey: `pass-${ctx.pass?.index ?? 0}`, cursor: {} }];
  };
  return new Map([["test", provider]]);
}

/** A follow run standing on its closing phase (phase 1) with `tasks` tasks of pass 0. */
async function followRun(intervalSeconds: number, tasks: number) {
  const follow: RunFollow = { intervalSeconds, cutoverAt: null, passes: [] };
  const run = await insertRun(h.db, {
    kinds: ["companies", "contacts"],
    plan: [["companies"], ["contacts"]],
    currentPhase: 1,
    follow,
  });
  const ids: number[] = [];
  for (let i = 0; i < tasks; i++)
    ids.push((await insertTask(h.db, run.id, { phase: 1, kind: "contacts" })).id);
  return { run, ids };
}

async function followOf(runId: string): Promise<RunFollow> {
  const [row] = await h.db.execute<{ follow: RunFollow }>(
    sql`select follow from drover.runs where id = ${runId}`,
  );
  return row!.follow;
}

async function pendingOf(runId: string) {
  return h.db.execute<{ id: number; seed_key: string; due_ms: number }>(sql`
    select id, seed_key, (extract(epoch from available_at) * 1000)::float8 as due_ms
      from drover.tasks where run_id = ${runId} and status = 'pending' order by id`);
}

async function runTask(id: number, token: string) {
  const task = (await claimTask(h.db, id, token))!;
  await h.db.transaction((tx) => finishTaskSucceeded(tx, task, token));
}

describe("follow passes", () => {
  it("thirty finishers of a pass at once: one closes it and opens the next, due one interval after its start", async () => {
    const asked: SeedContext["pass"][] = [];
    const providers = passProvider(asked);
    const { run, ids } = await followRun(60, 30);
    const claimed = [];
    for (const [i, id] of ids.entries()) claimed.push((await claimTask(h.db, id, `w${i}/1`))!);
    const pools = Array.from({ length: 3 }, () => openDatabase(h.testDb.url, { max: 5 }));
    try {
      await Promise.all(
        claimed.map(async (task, i) => {
          const pool = pools[i % pools.length]!;
          await pool.db.transaction((tx) => finishTaskSucceeded(tx, task, task.lockedBy!));
          return progressRun({ db: pool.db, providers, notesCap: 100 }, run.id);
        }),
      );
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
    const follow = await followOf(run.id);
    expect(follow.passes.map((p) => p.index)).toEqual([0, 1]);
    const [first, next] = follow.passes as [RunFollow["passes"][0], RunFollow["passes"][0]];
    expect(first.finishedAt).not.toBeNull();
    expect(first.since).toBe(run.startedAt!.toISOString());
    expect(next.since).toBe(first.startsAt);
    expect(Date.parse(next.startsAt)).toBe(Date.parse(first.startsAt) + 60_000);
    expect(next.finishedAt).toBeNull();
    expect(asked).toEqual([{ index: 1, since: first.startsAt }]);
    const pending = await pendingOf(run.id);
    expect(pending.map((t) => t.seed_key)).toEqual(["pass-1"]);
    expect(pending[0]!.due_ms).toBe(Date.parse(next.startsAt));
    const [r] = await h.db.execute<{ status: string; current_phase: number }>(
      sql`select status, current_phase from drover.runs where id = ${run.id}`,
    );
    expect(r).toEqual({ status: "running", current_phase: 1 });
  });

  it("a cutover makes the waiting pass due at once and the last: the run finishes after it", async () => {
    const providers = passProvider([]);
    const { run, ids } = await followRun(3600, 1);
    await runTask(ids[0]!, "w/0");
    await progressRun({ db: h.db, providers, notesCap: 100 }, run.id);
    expect(await requestCutover(h.db, run.id)).toBe(true);
    // Asked twice: the same cutover.
    expect(await requestCutover(h.db, run.id)).toBe(false);
    const follow = await followOf(run.id);
    expect(follow.passes.at(-1)!.startsAt).toBe(follow.cutoverAt);
    const [waiting] = await pendingOf(run.id);
    expect(waiting!.due_ms).toBeLessThanOrEqual(Date.now() + 1000);
    await runTask(waiting!.id, "w/1");
    expect(await progressRun({ db: h.db, providers, notesCap: 100 }, run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
    });
    const done = await followOf(run.id);
    expect(done.passes.map((p) => [p.index, p.finishedAt !== null])).toEqual([
      [0, true],
      [1, true],
    ]);
  });

  it("a cutover asked while a pass runs: one more pass, begun after the cutover, ends the run", async () => {
    const providers = passProvider([]);
    const { run, ids } = await followRun(3600, 1);
    const task = (await claimTask(h.db, ids[0]!, "w/0"))!;
    expect(await requestCutover(h.db, run.id)).toBe(true);
    await h.db.transaction((tx) => finishTaskSucceeded(tx, task, "w/0"));
    expect(await progressRun({ db: h.db, providers, notesCap: 100 }, run.id)).toEqual({ kind: "unchanged" });
    const follow = await followOf(run.id);
    expect(follow.passes).toHaveLength(2);
    expect(follow.passes[1]!.startsAt >= follow.cutoverAt!).toBe(true);
    const [last] = await pendingOf(run.id);
    await runTask(last!.id, "w/1");
    expect(await progressRun({ db: h.db, providers, notesCap: 100 }, run.id)).toMatchObject({
      kind: "finished",
    });
  });

  it("a resume starts the pass that waited for its start at once, and records that start", async () => {
    const providers = passProvider([]);
    const { run, ids } = await followRun(3600, 1);
    await runTask(ids[0]!, "w/0");
    await progressRun({ db: h.db, providers, notesCap: 100 }, run.id);
    expect(await requestStop(h.db, run.id)).toBe(true);
    expect(await settleStoppingRun(h.db, run.id)).toBe(true);
    const before = Date.now();
    expect(
      await rearmRun(h.db, run.id, { from: "stopped", tasksFrom: "cancelled", resetAttempts: false }),
    ).toBe(true);
    const open = (await followOf(run.id)).passes.at(-1)!;
    // Due now, and its recorded start (the next pass's since) no later than that.
    expect(Date.parse(open.startsAt)).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(open.startsAt)).toBeGreaterThan(before - 5000);
    const [due] = await pendingOf(run.id);
    expect(due!.due_ms).toBeLessThanOrEqual(Date.now());
  });
});
