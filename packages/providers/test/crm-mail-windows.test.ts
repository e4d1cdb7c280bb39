import type { Sandbox } from "@drover/crm-sandbox";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { drainKinds } from "./crm-drain.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * A mail task writes deals with a few messages each together: up to 25 messages (the engine's
 * per-row window) share one window, whose transaction moves the cursor past all their deals, so a
 * retry still starts at a deal. Most deals have a few messages; a transaction per deal made the
 * mail phase the longest of a run.
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

    const [task] = await account.db.execute<{ cursor: { index: number }; windows: number }>(sql`
      select t.cursor, (select count(*)::int from drover.window_commits w where w.task_id = t.id) as windows
        from drover.tasks t where t.id = ${mail[0]!.id}`);
    // Past every deal, in about one window per 25 messages rather than one per deal.
    expect(task!.cursor.index).toBe(DEALS);
    expect(task!.windows).toBeGreaterThanOrEqual(Math.ceil(truth.ids.length / 25));
    expect(task!.windows).toBeLessThan(DEALS / 2);
  });
});
