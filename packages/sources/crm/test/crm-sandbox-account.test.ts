import type { Sandbox, SandboxOptions } from "@drover/crm-sandbox";
import { readRunFact } from "@drover/engine";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { CUSTOM_FIELD_KEY } from "../src/fields.js";
import { BODY_SOURCE_FACT } from "../src/mail.js";
import { drainKinds, runOneTask, verifyCrmRun } from "./crm-drain.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * The crm provider against the sandbox serving Pipedrive's documented shapes (see
 * test/fixtures/pipedrive and crm-sandbox's contract-shapes test): what a real account's answers
 * ask of the import and of its verification.
 */
const account = crmTestAccount("sandbox-account");
const { token: TOKEN, secrets } = account;
type Json = Record<string, unknown>;

const SMALL = { organizations: 20, persons: 40, activities: 5, notes: 5 };

function sandbox(options: SandboxOptions): Promise<Sandbox> {
  return account.sandbox({ ...SMALL, ...options });
}

async function get(s: Sandbox, path: string): Promise<Json> {
  const res = await fetch(`${s.url}${path}`, { headers: { "x-api-token": TOKEN } });
  return (await res.json()) as Json;
}

let tenants = 0;

async function newRun(s: Sandbox, kinds: string[], settings: Record<string, string> = {}) {
  const tenantId = `sandbox-account-${++tenants}`;
  const runId = await insertCrmRun(account.db, secrets, {
    tenantId,
    sourceAccount: tenantId,
    kinds,
    baseUrl: s.url,
    token: TOKEN,
    settings,
  });
  return { runId, tenantId };
}

async function ledger(tenantId: string, kind: string): Promise<Map<string, string>> {
  const rows = await account.db.execute<{ source_id: string; record_id: string }>(sql`
    select source_id, record_id::text as record_id from drover.ledger where tenant_id = ${tenantId} and kind = ${kind}`);
  return new Map(rows.map((r) => [r.source_id, r.record_id]));
}

describe("leads", () => {
  it("are imported past the first page, where the leads list puts its pagination straight in additional_data, each custom field with its companions", async () => {
    const s = await sandbox({ seed: 21, deals: 5, leads: 230, archivedRate: 0.05 });
    const page = await get(s, "/v1/leads?limit=50");
    expect(page.additional_data).toMatchObject({ more_items_in_collection: true, next_start: 50 });
    const { runId, tenantId } = await newRun(s, ["leads"], { pageSize: "50", stripes: "1" });
    const tasks = await drainKinds(account.db, secrets, runId, [["leads"]]);
    expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
    const imported = await ledger(tenantId, "leads");
    expect([...imported.keys()].sort()).toEqual([...s.truth(["leads"]).kinds.leads.ids].sort());

    // A lead's custom fields are every root key of a field, a monetary one's currency among them.
    const stored = await account.db.execute<{ id: string; custom_fields: Json | null }>(sql`
      select id::text as id, custom_fields from app.leads where tenant_id = ${tenantId}`);
    const byRecord = new Map(stored.map((r) => [r.id, r.custom_fields]));
    let withCurrency = 0;
    for (const lead of ((await get(s, "/v1/leads?limit=500")).data as Json[]).slice(0, 120)) {
      const fields = Object.fromEntries(
        Object.entries(lead).filter(([k, v]) => CUSTOM_FIELD_KEY.test(k) && v !== null),
      );
      if (Object.keys(fields).some((k) => k.endsWith("_currency"))) withCurrency++;
      const have = byRecord.get(imported.get(lead.id as string)!);
      expect(have ?? null, String(lead.id)).toEqual(Object.keys(fields).length > 0 ? fields : null);
    }
    expect(withCurrency).toBeGreaterThan(10);

    // Leads are fetched one request a sampled row: verification compares a fifth of the sample.
    const verification = await verifyCrmRun(account.db, runId, TOKEN, 5 * 250);
    expect(verification.kinds.map((k) => [k.kind, k.mismatches])).toEqual([["leads", []]]);
    expect(verification.kinds[0]!.sampled).toBeGreaterThan(200);
  });
});

describe("a run with mail", () => {
  it("verifies against messages that name no deal: each belongs to the deal whose list holds it", async () => {
    const s = await sandbox({ seed: 22, deals: 60, leads: 5, mailPerDealMax: 3 });
    const one = (await get(s, `/v1/mailbox/mailMessages/1?include_body=1`)).data as Json;
    expect(one).not.toHaveProperty("deal_id");
    const { runId } = await newRun(s, ["deals", "mail"]);
    const tasks = await drainKinds(account.db, secrets, runId, [["deals"], ["mail"]]);
    expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
    // Mail is sampled through its deals' lists, a request a row: a fifth of the sample.
    const verification = await verifyCrmRun(account.db, runId, TOKEN, 5 * 60);
    expect(verification.kinds.map((k) => [k.kind, k.mismatches])).toEqual([
      ["deals", []],
      ["mail", []],
    ]);
    const mail = verification.kinds.find((k) => k.kind === "mail")!;
    expect(mail.sampled).toBe(60);
    expect(mail.sourceCount).toBe(s.truth(["mail"]).kinds.mail.count);
    expect(verification.ok).toBe(true);
  });
});

/** Each deal's messages as its list shows them with include_body=1. */
async function dealMail(s: Sandbox, deals: number): Promise<Map<number, Json[]>> {
  const out = new Map<number, Json[]>();
  for (let deal = 1; deal <= deals; deal++) {
    const page = await get(s, `/v1/deals/${deal}/mailMessages?include_body=1&limit=100`);
    out.set(
      deal,
      ((page.data as Json[] | null) ?? []).map((w) => w.data as Json),
    );
  }
  return out;
}

describe("the mail body mode", () => {
  const DEALS = 300;

  /** Imports the account's deals, then runs one mail task over `deals`; returns the run's finding. */
  async function mailTask(s: Sandbox, deals: number[]) {
    const { runId, tenantId } = await newRun(s, ["deals", "mail"]);
    await drainKinds(account.db, secrets, runId, [["deals"]]);
    const task = await runOneTask(account.db, secrets, runId, {
      kind: "mail",
      seedKey: `mail:${deals[0]}`,
      cursor: { deals: deals.map(String), index: 0 },
      phase: 1,
    });
    expect(task.status).toBe("succeeded");
    const bodies = await account.db.execute<{ id: string; body: string | null }>(sql`
      select l.source_id as id, e.body from drover.ledger l join app.emails e on e.id = l.record_id
       where l.tenant_id = ${tenantId} and l.kind = 'mail'`);
    return {
      fact: await readRunFact(account.db, runId, BODY_SOURCE_FACT),
      bodies: new Map(bodies.map((b) => [b.id, b.body])),
    };
  }

  it('is read from a message that has a body, not from a body-less one that sends null or ""', async () => {
    // An account whose list ignores include_body, yet sends body null or "" on a body-less message.
    const s = await sandbox({ seed: 23, deals: DEALS, leads: 5, listIncludeBody: 0 });
    const lists = await dealMail(s, DEALS);
    const deal = [...lists].find(
      ([, m]) => m.length > 1 && m[0]!.has_body_flag === 0 && "body" in m[0]! && m[1]!.has_body_flag === 1,
    )?.[0];
    expect(deal, 'a deal whose first message is body-less and says body null or ""').toBeDefined();
    s.resetStats();
    const { fact, bodies } = await mailTask(s, [deal!]);
    expect(fact).toBe("fetch");
    // A body is asked for only where the list's has_body_flag says there is one.
    const withBody = lists.get(deal!)!.filter((m) => m.has_body_flag === 1).length;
    expect(s.stats().byCallType.get ?? 0).toBe(withBody);
    for (const m of lists.get(deal!)!) {
      const body = bodies.get(String(m.id));
      if (m.has_body_flag === 1) expect(body, String(m.id)).toMatch(/^<html>/);
      else expect(body, String(m.id)).toBeNull();
    }
  });

  it("takes a body-less message without a body key as saying nothing on an account whose list honours include_body", async () => {
    const s = await sandbox({ seed: 24, deals: DEALS, leads: 5, listIncludeBody: 1 });
    const lists = await dealMail(s, DEALS);
    const deal = [...lists].find(
      ([, m]) => m.length > 1 && m[0]!.has_body_flag === 0 && !("body" in m[0]!) && m[1]!.has_body_flag === 1,
    )?.[0];
    expect(deal, "a deal whose first message is body-less and sends no body key").toBeDefined();
    s.resetStats();
    const { fact, bodies } = await mailTask(s, [deal!]);
    expect(fact).toBe("list");
    expect(s.stats().byCallType.get ?? 0).toBe(0);
    for (const m of lists.get(deal!)!)
      expect(bodies.get(String(m.id)) ?? null, String(m.id)).toBe(m.has_body_flag === 1 ? m.body : null);
  });

  it("stays undecided while every listed message is body-less, and those import without a body", async () => {
    const s = await sandbox({ seed: 25, deals: DEALS, leads: 5, listIncludeBody: 0 });
    const lists = await dealMail(s, DEALS);
    const deals = [...lists].filter(([, m]) => m.length > 0 && m.every((x) => x.has_body_flag === 0));
    expect(deals.length, "deals whose every message is body-less").toBeGreaterThan(0);
    s.resetStats();
    const { fact, bodies } = await mailTask(
      s,
      deals.map(([d]) => d),
    );
    expect(fact).toBeUndefined();
    // Their lists say has_body_flag 0: no body is asked for.
    expect(s.stats().byCallType.get ?? 0).toBe(0);
    expect([...bodies.values()].every((b) => b === null)).toBe(true);
    expect(bodies.size).toBe(deals.reduce((n, [, m]) => n + m.length, 0));
  });
});
