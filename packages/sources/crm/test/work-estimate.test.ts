import { estimateContext, taskTallies, toRunInfo } from "@drover/engine";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { estimateCrmWork } from "../src/work-estimate.js";
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
    const work = await estimateCrmWork(
      estimateContext(account.db, run, await taskTallies(account.db, run.id)),
    );
    const by = Object.fromEntries(work.kinds.map((k) => [k.kind, k]));
    expect(by.deals).toMatchObject({ requests: 2, tokens: 10 + 20 });
    expect(by.leads).toMatchObject({ requests: 1, tokens: 20 });
    // 3 mail lists at 20; no message met yet, so a body per deal at 2 while the body source is unknown.
    expect(by.mail).toMatchObject({ requests: 6, tokens: 3 * 20 + 3 * 2, atLeast: true });
  });

  it("counts a get only for the share of messages met so far that had a body, where bodies are fetched one by one", async () => {
    const runId = await insertCrmRun(account.db, account.secrets, {
      tenantId: "estimate-bodies",
      sourceAccount: "estimate-bodies",
      kinds: ["deals", "mail"],
      baseUrl: "http://127.0.0.1:9",
      token: "t",
    });
    const db = account.db;
    await db.execute(sql`insert into drover.run_facts (run_id, key, value)
      values (${runId}::uuid, 'crm.mail.bodies', '"fetch"'::jsonb)`);
    // Two deals walked, four left.
    await db.execute(sql`insert into drover.tasks (run_id, kind, phase, seed_key, status, cursor) values
      (${runId}::uuid, 'mail', 1, 'mail:a', 'succeeded', ${JSON.stringify({ deals: ["1", "2"], index: 2 })}::jsonb),
      (${runId}::uuid, 'mail', 1, 'mail:b', 'pending', ${JSON.stringify({ deals: ["3", "4", "5", "6"], index: 0 })}::jsonb)`);
    // The walked deals held four messages, one of them with a body.
    const [deal] = await db.execute<{ id: string }>(
      sql`insert into app.deals (tenant_id, title) values ('estimate-bodies', 'd') returning id`,
    );
    for (const [i, body] of ["<p>hi</p>", null, null, null].entries()) {
      const [email] = await db.execute<{ id: string }>(sql`
        insert into app.emails (tenant_id, deal_id, subject, body)
        values ('estimate-bodies', ${deal!.id}, 's', ${body}) returning id`);
      await db.execute(sql`
        insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
        values ('estimate-bodies', 'crm', 'estimate-bodies', 'mail', ${`m${i}`}, 'created', 'email', ${email!.id}, ${runId}::uuid)`);
    }
    const run = toRunInfo((await db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!);
    const work = await estimateCrmWork(estimateContext(db, run, await taskTallies(db, run.id)));
    const mail = work.kinds.find((k) => k.kind === "mail")!;
    // 4 lists; 2 messages a deal, a quarter of them with a body: 4 × 2 × ¼ = 2 gets.
    expect(mail).toMatchObject({ requests: 4 + 2, tokens: 4 * 20 + 2 * 2, atLeast: false });
  });
});
