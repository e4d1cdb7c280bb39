import { taskTallies, toRunInfo } from "@drover/engine";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { estimateCrmWork } from "../src/crm/work-estimate.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * What a live crm run still needs, for its ETA, in tokens at each endpoint's published cost: a v2
 * page 10, the archived deals' page 20, a v1 page 20, a mail list 20, a body 2; and before the mail
 * phase, the mail of the deals the pages of deals found with mail, not of every deal.
 */
const account = crmTestAccount("work-estimate");

describe("a crm run's work left", () => {
  it("prices each open page at its list's cost and counts mail for the deals found with mail only", async () => {
    const runId = await insertCrmRun(account.db, account.secrets, {
      tenantId: "estimate",
      sourceAccount: "estimate",
      kinds: ["deals", "leads", "mail"],
      baseUrl: "http://127.0.0.1:9",
      token: "t",
    });
    const task = (kind: string, key: string, status: string, cursor: unknown) =>
      account.db.execute(sql`insert into drover.tasks (run_id, kind, phase, seed_key, status, cursor)
        values (${runId}::uuid, ${kind}, 0, ${key}, ${status}, ${JSON.stringify(cursor)}::jsonb)`);
    // A page of deals done, which found 3 deals with mail; the next page and the archived deals' still open.
    await task("deals", "deals:0:page:0", "succeeded", {
      list: 0,
      page: 0,
      limit: 500,
      mail: { deals: ["1", "2", "3"], expected: [2, 1, null] },
    });
    await task("deals", "deals:0:page:1", "pending", { list: 0, page: 1, limit: 500, cursor: "c" });
    await task("deals", "deals:1:page:0", "pending", { list: 1, page: 0, limit: 500 });
    await task("leads", "leads:0:page:0", "pending", { list: 0, page: 0, limit: 500 });
    const run = toRunInfo(
      (await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!,
    );
    const work = await estimateCrmWork(account.db, run, await taskTallies(account.db, run.id));
    const by = Object.fromEntries(work.kinds.map((k) => [k.kind, k]));
    expect(by.deals).toMatchObject({ requests: 2, tokens: 10 + 20 });
    expect(by.leads).toMatchObject({ requests: 1, tokens: 20 });
    // 3 mail lists at 20; no message met yet, so a body per deal at 2 while the body source is unknown.
    expect(by.mail).toMatchObject({ requests: 6, tokens: 3 * 20 + 3 * 2, atLeast: true });
  });
});
