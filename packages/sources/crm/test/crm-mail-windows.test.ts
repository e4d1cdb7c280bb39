import type { Sandbox } from "@drover/crm-sandbox";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { dealAt } from "../src/mail.js";
import { drainKinds } from "./crm-drain.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * A mail task writes deals with a few messages each together: the messages of many deals (up to
 * about 200, in windows of the run's windowSize) share one window, whose transaction moves the
 * cursor past all their deals; a checkpoint inside them (a window written again row by row) names
 * the deal and the rows of it done. Most deals have a few messages; a transaction per deal, then
 * per 25 messages, made the mail phase the longest of a run.
 */
let sandbox: Sandbox;
const account = crmTestAccount("mail-windows");
const { token: TOKEN, secrets } = account;
const DEALS = 40;

beforeAll(async () => {
  sandbox = await account.sandbox({
    seed: 12,
    organizations: 5,
    persons: 5,
    deals: DEALS,
    leads: 0,
    activities: 0,
    notes: 0,
    mailPerDealMax: 3,
  });
});

describe("a mail task", () => {
  it("writes small deals' messages in shared windows, each moving the cursor past its deals, every message once", async () => {
    const runId = await insertCrmRun(account.db, secrets, {
      tenantId: "mail-windows",
      sourceAccount: "mail-windows",
      kinds: ["deals", "mail"],
      baseUrl: sandbox.url,
      token: TOKEN,
      settings: { dealsPerMailTask: String(DEALS) },
    });
    const tasks = await drainKinds(account.db, secrets, runId, [["deals"], ["mail"]]);
    expect(tasks.every((t) => t.status === "succeeded")).toBe(true);
    const mail = tasks.filter((t) => t.kind === "mail");
    expect(mail).toHaveLength(1);

    const truth = sandbox.truth(["mail"]).kinds.mail;
    const [ledger] = await account.db.execute<{ n: number; ids: number }>(sql`
      select count(*)::int as n, count(distinct source_id)::int as ids from drover.ledger
       where tenant_id = 'mail-windows' and kind = 'mail'`);
    expect(ledger!.ids).toBe(truth.ids.length);
    expect(ledger!.n).toBe(truth.ids.length);

    const [task] = await account.db.execute<{
      cursor: { index: number; deals: string[] };
      windows: number;
    }>(sql`
      select t.cursor, (select count(*)::int from drover.window_commits w where w.task_id = t.id) as windows
        from drover.tasks t where t.id = ${mail[0]!.id}`);
    // Past every deal that has mail (the others are not listed), in one window for all of them
    // (fewer than 200 messages), not one per deal.
    const [withMail] = await account.db.execute<{ n: number }>(sql`
      select count(distinct deal_id)::int as n from app.emails where tenant_id = 'mail-windows'`);
    expect(task!.cursor.deals).toHaveLength(withMail!.n);
    expect(withMail!.n).toBeLessThan(DEALS);
    expect(task!.cursor.index).toBe(withMail!.n);
    expect(truth.ids.length).toBeGreaterThan(DEALS / 2);
    expect(truth.ids.length).toBeLessThan(200);
    expect(task!.windows).toBe(1);
  });

  it("places a checkpoint inside a window of several deals at the deal of its next row, past deals without messages", () => {
    // Deals of 3, 0, 0, 2 and 4 messages: rows 0-2, 3-4, 5-8.
    const starts = [0, 3, 3, 3, 5];
    expect(dealAt(starts, 0)).toEqual({ deal: 0, offset: 0 });
    expect(dealAt(starts, 2)).toEqual({ deal: 0, offset: 2 });
    expect(dealAt(starts, 3)).toEqual({ deal: 3, offset: 0 });
    expect(dealAt(starts, 4)).toEqual({ deal: 3, offset: 1 });
    expect(dealAt(starts, 5)).toEqual({ deal: 4, offset: 0 });
    expect(dealAt(starts, 8)).toEqual({ deal: 4, offset: 3 });
  });
});
