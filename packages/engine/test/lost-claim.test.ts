import type { Provider } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAssignment } from "../src/index.js";
import { companyWriter, deferred, type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

/** A source page: 10 ms, and it stops at once when the attempt is aborted, as the real client does. */
function fetchPage(signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, 10);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

describe("a task whose claim was lost", () => {
  it("stops calling the source at once and writes nothing, ending as a lost claim", async () => {
    const run = await insertRun(h.db);
    const task = await insertTask(h.db, run.id);
    let calls = 0;
    let callsAtRelease = -1;
    const fifthCall = deferred();
    // Like a mail task: many source calls between two windows, so its next checkpoint is far off.
    const provider: Provider = {
      name: "test",
      phases: [["companies"]],
      validateConfig: () => undefined,
      seedPhase: async () => [],
      async runTask(ctx) {
        const rows = [];
        for (let page = 0; page < 300; page++) {
          await fetchPage(ctx.signal);
          calls++;
          if (calls === 5) fifthCall.resolve();
          rows.push({ sourceId: `c${page}`, data: { name: `company ${page}` } });
        }
        await ctx.writeRows(rows, companyWriter);
        return {};
      },
    };
    const outcome = runAssignment(
      {
        db: h.db,
        providers: new Map([["test", provider]]),
        workerId: "w",
        maxAttempts: 3,
        notesCap: 10,
        touchEveryMs: 50,
      },
      task.id,
      { shutdown: new AbortController().signal, working: () => {} },
    );

    await fifthCall.promise;
    // What the reaper does to a task whose lock it took for stale: back to pending for another worker.
    await h.db.execute(sql`
      update drover.tasks
         set status = 'pending', last_error = 'its worker stopped responding', locked_by = null, locked_at = null,
             dispatched_at = null, available_at = now(), updated_at = now()
       where id = ${task.id} and status = 'running'`);
    callsAtRelease = calls;

    const ended = await outcome;
    expect(ended.status).toBe("lost");
    // About one touch interval of 10 ms pages (room for a loaded machine), not the 300 before the next checkpoint.
    expect(calls - callsAtRelease).toBeLessThanOrEqual(20);
    const [row] = await h.db.execute<{
      status: string;
      last_error: string;
      attempts: number;
      locked_by: null;
    }>(sql`select status, last_error, attempts, locked_by from drover.tasks where id = ${task.id}`);
    expect(row).toEqual({
      status: "pending",
      last_error: "its worker stopped responding",
      attempts: 1,
      locked_by: null,
    });
    const [written] = await h.db.execute<{ n: number }>(sql`select count(*)::int as n from app.companies`);
    expect(written!.n).toBe(0);
  });
});
