import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  admitRevertRun,
  admitRun,
  LiveRunConflict,
  RunAlreadyReverted,
  rearmRun,
  redriveRun,
} from "../src/index.js";
import { type Harness, insertRun, newRun, openHarness, testProvider } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

const RESUME = { from: "stopped", tasksFrom: "cancelled", resetAttempts: false } as const;

async function conflictOf(move: Promise<unknown>): Promise<LiveRunConflict> {
  const err = await move.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LiveRunConflict);
  return err as LiveRunConflict;
}

describe("a second live run of one tenant and source account", () => {
  it("is refused at admission with a LiveRunConflict naming the live run", async () => {
    const live = await insertRun(h.db);
    const err = await conflictOf(
      admitRun(
        h.db,
        testProvider(() => []),
        newRun(live.tenantId),
      ),
    );
    expect(err.liveRun).toEqual({ id: live.id, status: "running" });
    expect(err.scope).toEqual({ tenantId: live.tenantId, source: "test", sourceAccount: "acct" });
    expect(err.message).toContain(`run ${live.id} is running`);
  });

  it("is refused on resume and on re-drive, naming the sibling, not the run being moved", async () => {
    const stopped = await insertRun(h.db, { status: "stopped", finishedAt: new Date() });
    const live = await insertRun(h.db, { tenantId: stopped.tenantId });
    expect((await conflictOf(rearmRun(h.db, stopped.id, RESUME))).liveRun?.id).toBe(live.id);

    const finished = await insertRun(h.db, { tenantId: stopped.tenantId, status: "succeeded" });
    const redrive = redriveRun(h.db, finished.id, [{ kind: "companies", seedKey: "redrive:1", cursor: {} }]);
    expect((await conflictOf(redrive)).liveRun?.id).toBe(live.id);
  });

  it("is refused for a revert; a second revert of one run names the first instead", async () => {
    const target = await insertRun(h.db, { status: "succeeded", finishedAt: new Date() });
    const live = await insertRun(h.db, { tenantId: target.tenantId });
    const input = (id: string) => ({ id, force: false, traceContext: {} });
    const refused = await conflictOf(admitRevertRun(h.db, target, input(crypto.randomUUID())));
    expect(refused.liveRun?.id).toBe(live.id);

    await h.db.execute(`update drover.runs set status = 'stopped' where id = '${live.id}'`);
    const first = await admitRevertRun(h.db, target, input(crypto.randomUUID()));
    await h.db.execute(`update drover.runs set status = 'succeeded' where id = '${first.id}'`);
    const err = await admitRevertRun(h.db, target, input(crypto.randomUUID())).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RunAlreadyReverted);
    expect((err as RunAlreadyReverted).revertedBy).toBe(first.id);
  });
});
