import type { Sandbox } from "@drover/crm-sandbox";
import { runAssignment, seedContext, toRunInfo } from "@drover/engine";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { crmProvider } from "../src/provider.js";
import { crmProviders as providers } from "./crm-providers.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * A list task walks up to `pagesPerTask` pages in one claim: each page commits with the task's
 * cursor moved to the next one, so a task given up part-way resumes at the first page it did not
 * commit, and the pages past its share go to one successor task.
 */
let sandbox: Sandbox;
const account = crmTestAccount("list-walk");
const { token: TOKEN, secrets } = account;
const ORGANIZATIONS = 250;
const SETTINGS = { pageSize: "50", pagesPerTask: "3" };

beforeAll(async () => {
  sandbox = await account.sandbox({
    seed: 8,
    organizations: ORGANIZATIONS,
    persons: 0,
    deals: 0,
    leads: 0,
    activities: 0,
    notes: 0,
    mailPerDealMax: 0,
  });
});

async function newRun(tenantId: string) {
  const runId = await insertCrmRun(account.db, secrets, {
    tenantId,
    sourceAccount: "list-walk",
    kinds: ["organizations"],
    baseUrl: sandbox.url,
    token: TOKEN,
    settings: SETTINGS,
  });
  const run = toRunInfo((await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!);
  const seeds = await crmProvider.seedPhase(seedContext(undefined as never, run, 0, ["organizations"]));
  return { runId, seeds };
}

async function ledger(tenantId: string) {
  const [row] = await account.db.execute<{ n: number; ids: number }>(sql`
    select count(*)::int as n, count(distinct source_id)::int as ids from drover.ledger
     where tenant_id = ${tenantId} and kind = 'organizations'`);
  return row!;
}

type TaskRow = { id: string; seed_key: string; status: string; cursor: { page: number }; windows: number };
const tasksOf = (runId: string) =>
  account.db.execute<TaskRow>(sql`
    select t.id, t.seed_key, t.status, t.cursor,
           (select count(*)::int from drover.window_commits w where w.task_id = t.id) as windows
      from drover.tasks t where t.run_id = ${runId}::uuid order by t.id`);

describe("a list task", () => {
  it("walks pagesPerTask pages in one claim, each committed with the cursor on the next page, and hands the rest to one successor", async () => {
    const { runId, seeds } = await newRun("walk");
    const { summary, statuses } = await drainTasks(account.db, secrets, runId, seeds);
    expect(statuses).toEqual(["succeeded", "succeeded"]);
    expect(summary).toMatchObject({ attempted: ORGANIZATIONS, created: ORGANIZATIONS, failed: 0 });
    const tasks = await tasksOf(runId);
    expect(tasks.map((t) => [t.seed_key, t.cursor.page, t.windows])).toEqual([
      // Pages 0, 1 and 2, one window each; the task ends on page 2, the last it walked.
      ["organizations:0:page:0", 2, 3],
      ["organizations:0:page:3", 4, 2],
    ]);
    expect(await ledger("walk")).toEqual({ n: ORGANIZATIONS, ids: ORGANIZATIONS });
  });

  it("handed back part-way resumes at the first page it did not commit: every row written once", async () => {
    const { runId, seeds } = await newRun("resume");
    await account.db.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
      values (${runId}::uuid, ${seeds[0]!.kind}, 0, ${seeds[0]!.seedKey}, ${JSON.stringify(seeds[0]!.cursor)}::jsonb)`);
    const [task] = await tasksOf(runId);
    const shutdown = new AbortController();
    let pages = 0;
    const outcome = await runAssignment(
      { db: account.db, providers, workerId: "list-walk", maxAttempts: 3, notesCap: 100, secrets },
      Number(task!.id),
      {
        shutdown: shutdown.signal,
        // Told after each page's write: the worker starts shutting down once page 0 is committed,
        // and the task hands itself back when its next page has committed.
        working: () => {
          if (++pages === 1) shutdown.abort();
        },
      },
    );
    expect(outcome.status).toBe("handed_back");
    const [handedBack] = await tasksOf(runId);
    expect(handedBack).toMatchObject({ status: "pending", windows: 2 });
    expect(handedBack!.cursor.page).toBe(2);
    expect(await ledger("resume")).toEqual({ n: 100, ids: 100 });

    // The rest of the run: the same task from page 2 to the end of the list (its three pages).
    const { summary, statuses } = await drainTasks(account.db, secrets, runId, []);
    expect(statuses).toEqual(["succeeded"]);
    expect(summary).toMatchObject({ attempted: 150, created: 150, alreadyHere: 0 });
    expect(await ledger("resume")).toEqual({ n: ORGANIZATIONS, ids: ORGANIZATIONS });
  });
});
