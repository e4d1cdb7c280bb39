import type { Provider } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { claimTask, runAssignment, yieldSlot } from "../src/index.js";
import { companyWriter, type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});
// Each case sets the pool up itself: nothing of an earlier case is left running or waiting.
beforeEach(async () => {
  await h.db.execute(
    sql`update drover.tasks set status = 'succeeded' where status in ('pending', 'running')`,
  );
});

const PAGES = 40;

/** A list walked in one attempt, a page of two rows per unit, resuming from the task's cursor. */
const pagedProvider: Provider = {
  name: "test",
  phases: [["companies"]],
  validateConfig: () => undefined,
  seedPhase: async () => [],
  async runTask(ctx) {
    for (let page = Number(ctx.task.cursor.page ?? 0); page < PAGES; page++) {
      await new Promise((r) => setTimeout(r, 5));
      const rows = [0, 1].map((i) => ({
        sourceId: `c${page}-${i}`,
        data: { name: `company ${page}-${i}` },
      }));
      await ctx.writeRows(rows, companyWriter, { nextCursor: { page: page + 1 } });
    }
    return {};
  },
};

const deps = () => ({
  db: h.db,
  providers: new Map([["test", pagedProvider]]),
  workerId: "w",
  maxAttempts: 3,
  notesCap: 10,
  stopPollMs: 0,
});
const controls = () => ({ shutdown: new AbortController().signal, working: () => {} });

/** A large run holding `running` claimed tasks with a recorded share of `share` (and ceiling, while reserving). */
async function runOverShare(running: number, share: number, shareCeiling: number | null = null) {
  const run = await insertRun(h.db, { fairShare: share, shareCeiling });
  const held = [];
  for (let i = 0; i < running; i++) {
    const t = await insertTask(h.db, run.id);
    held.push((await claimTask(h.db, t.id, `other/${t.id}`))!);
  }
  return { run, held };
}

/** Another tenant's run, `running` tasks claimed, whose next task is published and waits for a lane slot. */
async function waitingRun(running = 0) {
  const run = await insertRun(h.db, { fairShare: running + 1 });
  for (let i = 0; i < running; i++) {
    const t = await insertTask(h.db, run.id);
    await claimTask(h.db, t.id, `waiting/${t.id}`);
  }
  const task = await insertTask(h.db, run.id, { dispatchedAt: new Date() });
  return { run, task };
}

async function taskRow(id: number) {
  const [row] = await h.db.execute<{
    status: string;
    attempts: number;
    dispatched_at: Date | null;
    cursor: { page?: number };
  }>(sql`select status, attempts, dispatched_at, cursor from drover.tasks where id = ${id}`);
  return row!;
}

describe("a run over its fair share while another run waits", () => {
  it("gives a slot up between units, pending and unpublished, its committed pages kept", async () => {
    const { run } = await runOverShare(1, 1);
    const waiting = await waitingRun();
    const task = await insertTask(h.db, run.id, { dispatchedAt: new Date() });

    const outcome = await runAssignment(deps(), task.id, controls());

    expect(outcome.status).toBe("yielded");
    const row = await taskRow(task.id);
    // Back to pending for its run's next publish, the attempt not counted, where it got to.
    expect(row).toMatchObject({ status: "pending", attempts: 0, dispatched_at: null });
    expect(row.cursor.page).toBeGreaterThan(0);
    expect(row.cursor.page).toBeLessThan(PAGES);
    expect((await taskRow(waiting.task.id)).status).toBe("pending");

    // Resumed once the run may run it again, it goes on from there and writes nothing twice.
    await h.db.execute(sql`update drover.tasks set status = 'succeeded' where id = ${waiting.task.id}`);
    const again = await runAssignment(deps(), task.id, controls());
    expect(again.status).toBe("succeeded");
    const [count] = await h.db.execute<{ n: number }>(sql`
      select count(*)::int as n from app.companies where name like 'company %'`);
    expect(count!.n).toBeGreaterThanOrEqual(PAGES * 2);
    const [dupes] = await h.db.execute<{ n: number }>(sql`
      select count(*)::int as n from (select name from app.companies group by name having count(*) > 1) d`);
    expect(dupes!.n).toBe(0);
  });

  it("keeps its slot when no other run has a task waiting", async () => {
    const { run } = await runOverShare(1, 1);
    const task = await insertTask(h.db, run.id, { dispatchedAt: new Date() });

    const outcome = await runAssignment(deps(), task.id, controls());

    expect(outcome.status).toBe("succeeded");
  });

  it("keeps its slot when the run is within its share", async () => {
    const { run } = await runOverShare(1, 2);
    await waitingRun();
    const task = await insertTask(h.db, run.id, { dispatchedAt: new Date() });

    const outcome = await runAssignment(deps(), task.id, controls());

    expect(outcome.status).toBe("succeeded");
  });

  it("keeps its slot when the waiting run would then hold as many as it: an uneven split stays put", async () => {
    // Three running on a share of two beside a run of two waiting for its third: handing the slot
    // over would only swap which of them holds the odd one, and the next round would swap it back.
    const { run } = await runOverShare(2, 2);
    await waitingRun(2);
    const task = await insertTask(h.db, run.id, { dispatchedAt: new Date() });

    const outcome = await runAssignment(deps(), task.id, controls());

    expect(outcome.status).toBe("succeeded");
  });

  it("yields only the run's excess when several of its tasks ask at once", async () => {
    // Four running, a share of two: of four tasks asking together, exactly two give their slot up.
    const { held } = await runOverShare(4, 2);
    await waitingRun();

    const yielded = await Promise.all(held.map((t) => yieldSlot(h.db, t.runId, t.id, t.lockedBy!)));

    expect(yielded.filter(Boolean)).toHaveLength(2);
  });
});

describe("a run above the share ceiling while the pool reserves shares (busy workers)", () => {
  it("gives a slot up though no other run waits: the slot is kept for a present run", async () => {
    const { run } = await runOverShare(1, 1, 1);
    const task = await insertTask(h.db, run.id, { dispatchedAt: new Date() });

    const outcome = await runAssignment(deps(), task.id, controls());

    expect(outcome.status).toBe("yielded");
    expect(await taskRow(task.id)).toMatchObject({ status: "pending", attempts: 0, dispatched_at: null });
  });

  it("keeps its slot at the ceiling, above its share, when nobody waits: an odd slot is not given up", async () => {
    const { run } = await runOverShare(1, 1, 2);
    const task = await insertTask(h.db, run.id, { dispatchedAt: new Date() });

    const outcome = await runAssignment(deps(), task.id, controls());

    expect(outcome.status).toBe("succeeded");
  });

  it("yields down to the ceiling when several of its tasks ask at once", async () => {
    const { held } = await runOverShare(5, 2, 3);

    const yielded = await Promise.all(held.map((t) => yieldSlot(h.db, t.runId, t.id, t.lockedBy!)));

    expect(yielded.filter(Boolean)).toHaveLength(2);
  });
});

describe("a succeeded task's finish hands its slot on (handOnAtFinish)", () => {
  it("marks the run's next tasks published in the commit that frees the slot, up to the run's share", async () => {
    const run = await insertRun(h.db, { fairShare: 2 });
    const busy = await insertTask(h.db, run.id);
    await claimTask(h.db, busy.id, `other/${busy.id}`);
    const finishing = await insertTask(h.db, run.id, { dispatchedAt: new Date() });
    const next = [await insertTask(h.db, run.id), await insertTask(h.db, run.id)];

    const outcome = await runAssignment({ ...deps(), handOnAtFinish: true }, finishing.id, controls());

    expect(outcome.status).toBe("succeeded");
    // One slot freed, the share 2 with one task still running: exactly one next task, the oldest.
    expect(outcome.status !== "dropped" && outcome.handedOn?.ids).toEqual([next[0]!.id]);
    expect((await taskRow(next[0]!.id)).dispatched_at).not.toBeNull();
    expect((await taskRow(next[1]!.id)).dispatched_at).toBeNull();
    expect((await taskRow(finishing.id)).status).toBe("succeeded");
  });

  it("hands nothing on without the option: the caller does it in a transaction of its own", async () => {
    const run = await insertRun(h.db, { fairShare: 2 });
    const finishing = await insertTask(h.db, run.id, { dispatchedAt: new Date() });
    const waiting = await insertTask(h.db, run.id);

    const outcome = await runAssignment(deps(), finishing.id, controls());

    expect(outcome.status).toBe("succeeded");
    expect(outcome.status !== "dropped" && outcome.handedOn).toBeUndefined();
    expect((await taskRow(waiting.id)).dispatched_at).toBeNull();
  });
});
