import type { Sandbox } from "@drover/crm-sandbox";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { crmRedrive } from "../src/redrive.js";
import { drainKinds } from "./crm-drain.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * A mail re-drive on an account whose per-deal list carries bodies (since 2026): the deals of the
 * tasks that noted the messages are listed again with include_body, and no message is fetched one
 * by one. (test/e2e/redrive.test.ts covers the fetch mode through the coordinator.)
 */
const account = crmTestAccount("mail-redrive");
const { token: TOKEN, secrets } = account;
const ACCOUNT = {
  seed: 31,
  organizations: 5,
  persons: 5,
  deals: 30,
  leads: 0,
  activities: 0,
  notes: 0,
  mailPerDealMax: 3,
};
let broken: Sandbox;
let fixed: Sandbox;

beforeAll(async () => {
  broken = await account.sandbox({ ...ACCOUNT, malformedRate: 0.2 });
  fixed = await account.sandbox({ ...ACCOUNT });
});

describe("a mail re-drive where the list carries bodies", () => {
  it("lists the noting tasks' deals with their bodies, fetches no message alone, and imports exactly the failed messages", async () => {
    const runId = await insertCrmRun(account.db, secrets, {
      tenantId: "mail-redrive",
      sourceAccount: "mail-redrive",
      kinds: ["deals", "mail"],
      baseUrl: broken.url,
      token: TOKEN,
      settings: { dealsPerMailTask: "10" },
    });
    await drainKinds(account.db, secrets, runId, [["deals"], ["mail"]]);
    const [fact] = await account.db.execute<{ value: string }>(sql`
      select value #>> '{}' as value from drover.run_facts where run_id = ${runId}::uuid and key = 'crm.mail.bodies'`);
    expect(fact?.value).toBe("list");
    const noted = await account.db.execute<{ subject_id: string; deals: string[] }>(sql`
      select distinct on (n.subject_id) n.subject_id, t.cursor -> 'deals' as deals
        from drover.notes n join drover.tasks t on t.id = n.task_id
       where n.run_id = ${runId}::uuid and n.kind = 'mail' and n.level = 'error'
       order by n.subject_id, n.id desc`);
    expect(noted.length, "malformed messages").toBeGreaterThan(0);
    const failed = noted.map((n) => n.subject_id);
    const emailsBefore = await emailCount();

    // The customer fixed the account: the same data, served clean, at the run's address.
    await account.db.execute(sql`
      update drover.runs set source_config = jsonb_set(source_config, '{baseUrl}', to_jsonb(${fixed.url}::text))
       where id = ${runId}::uuid`);
    // Deals first (by id), so every message has its deal to link to.
    const deals = await account.db.execute<{ subject_id: string }>(sql`
      select distinct subject_id from drover.notes
       where run_id = ${runId}::uuid and kind = 'deals' and level = 'error'`);
    await drainTasks(
      account.db,
      secrets,
      runId,
      crmRedrive.seeds(
        "deals",
        deals.map((d) => ({ sourceId: d.subject_id })),
        "deals",
      ),
      1,
    );
    fixed.resetStats();
    const seeds = crmRedrive.seeds(
      "mail",
      noted.map((n) => ({ sourceId: n.subject_id, listedIn: { deals: n.deals } })),
      "list-mode",
    );
    const { statuses } = await drainTasks(account.db, secrets, runId, seeds, 1);
    expect(statuses.every((s) => s === "succeeded")).toBe(true);

    const stats = fixed.stats();
    expect(stats.byCallType.get ?? 0).toBe(0);
    const units = new Set(noted.flatMap((n) => n.deals));
    expect(stats.byCallType.list).toBeGreaterThan(0);
    expect(stats.byCallType.list).toBeLessThanOrEqual(units.size);

    const slots = await account.db.execute<{
      source_id: string;
      action: string;
      has_body: boolean;
      deal: string;
    }>(sql`
      select l.source_id, l.action, e.body is not null as has_body, d.source_id as deal
        from drover.ledger l
        join app.emails e on e.id = l.record_id
        join drover.ledger d on d.record_id = e.deal_id and d.kind = 'deals' and d.tenant_id = l.tenant_id
       where l.tenant_id = 'mail-redrive' and l.kind = 'mail' and l.source_id = any(${sql.param(failed)}::text[])`);
    expect(slots.map((s) => s.source_id).sort()).toEqual([...failed].sort());
    expect(slots.every((s) => s.action === "created")).toBe(true);
    expect(await emailCount()).toBe(emailsBefore + failed.length);
    // Each message is linked to the deal whose list holds it, with the body the list carried.
    const truth = fixed.truth(["mail"]).kinds.mail;
    expect(failed.every((id) => truth.ids.includes(id))).toBe(true);
    for (const s of slots) expect(noted.find((n) => n.subject_id === s.source_id)!.deals).toContain(s.deal);
    expect(slots.some((s) => s.has_body)).toBe(true);
  });
});

async function emailCount(): Promise<number> {
  const [row] = await account.db.execute<{ n: number }>(
    sql`select count(*)::int as n from app.emails where tenant_id = 'mail-redrive'`,
  );
  return row!.n;
}
