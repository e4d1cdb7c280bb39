import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { runAssignment } from "@drover/engine";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crmProviders as providers } from "./crm-providers.js";
import { insertCrmRun } from "./crm-run.js";

/**
 * The crm provider against recorded Pipedrive responses (test/fixtures/pipedrive, each with the
 * public source of its shape in the README there): what it asks for, and where every row ends.
 */
const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/pipedrive/${name}.json`, import.meta.url), "utf8"));

interface Seen {
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
}
const seen: Seen[] = [];
/** An updated_since for which the archived list answers an empty first page that points on. */
const EMPTY_THEN_MORE = "2026-11-29T00:00:00.000Z";
/** Whether the fixture account's per-deal mail list honours include_body. */
let listBodies = true;

let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
let server: Server;
let baseUrl: string;
const TOKEN = "contract-token-123456";
const secrets = new SecretKeyring(parseSecretKeys(generateSecretKey("contract")));

function answer(path: string, query: URLSearchParams): unknown {
  switch (path) {
    case "/api/v2/deals":
      return fixture(query.get("cursor") === "eyJkZWFsIjoxMDJ9" ? "v2-deals-page2" : "v2-deals-page1");
    case "/api/v2/deals/archived":
      if (query.get("updated_since") === EMPTY_THEN_MORE)
        return fixture(query.has("cursor") ? "v2-deals-archived" : "v2-empty-page-with-cursor");
      return fixture("v2-deals-archived");
    case "/api/v2/persons":
      return fixture("v2-persons");
    case "/api/v2/organizations":
      return fixture("v2-organizations");
    case "/api/v2/activities":
      return fixture("v2-activities");
    case "/v1/leads":
      return Number(query.get("start")) === 0 ? fixture("v1-leads") : fixture("v1-empty-null-data");
    case "/v1/leads/archived":
      return fixture("v1-leads-archived");
    case "/v1/notes":
      return fixture("v1-notes");
    case "/v1/deals/101/mailMessages": {
      const page = fixture("v1-deal-mail-with-body") as { data: { data: Record<string, unknown> }[] };
      // An account without the 2026 list include_body sends no body key at all.
      if (!listBodies || query.get("include_body") !== "1") for (const w of page.data) delete w.data.body;
      return page;
    }
  }
  const one = /^\/v1\/mailbox\/mailMessages\/(\d+)$/.exec(path);
  if (one) return { success: true, data: { id: Number(one[1]), body: `<p>fetched ${one[1]}</p>` } };
  return undefined;
}

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    seen.push({ path: url.pathname, query: url.searchParams, headers: req.headers });
    const body = answer(url.pathname, url.searchParams);
    res.setHeader("content-type", "application/json");
    if (body === undefined) res.statusCode = 404;
    res.end(JSON.stringify(body ?? { success: false, error: "not found" }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await database?.close();
  await testDb?.drop();
});

const ACCOUNT = "fixture-account";
let tenants = 0;

/** A running run of its own tenant, so tests do not see each other's ledger. */
async function newRun(kinds: string[]): Promise<{ runId: string; tenantId: string }> {
  const tenantId = `contract-${++tenants}`;
  const runId = await insertCrmRun(database.db, secrets, {
    tenantId,
    sourceAccount: ACCOUNT,
    kinds,
    baseUrl,
    token: TOKEN,
    // One page per task, so each test pins one recorded request and the successor its checkpoint
    // becomes (a task walking on would ask the recorded server for pages it does not have;
    // crm-list-walk.test.ts pins the walk across pages).
    settings: { pagesPerTask: "1" },
  });
  return { runId, tenantId };
}

async function runTask(runId: string, kind: string, seedKey: string, cursor: Record<string, unknown>) {
  const [task] = await database.db.execute<{ id: string }>(sql`
    insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
    values (${runId}::uuid, ${kind}, 0, ${seedKey}, ${JSON.stringify(cursor)}::jsonb) returning id`);
  seen.length = 0;
  const outcome = await runAssignment(
    { db: database.db, providers, workerId: "contract", maxAttempts: 3, notesCap: 100, secrets },
    Number(task!.id),
    { shutdown: new AbortController().signal, working: () => {} },
  );
  const successors = await database.db.execute<{
    kind: string;
    seed_key: string;
    cursor: Record<string, unknown>;
  }>(
    sql`select kind, seed_key, cursor from drover.tasks where run_id = ${runId}::uuid and id > ${task!.id} order by id`,
  );
  return { outcome, successors, requests: [...seen] };
}

/** A parent the ledger knows: a destination record and its ledger row. */
async function knownParent(tenantId: string, runId: string, kind: string, sourceId: string): Promise<number> {
  const table = { deals: "deals", persons: "contacts", organizations: "companies", leads: "leads" }[kind]!;
  const column = kind === "persons" || kind === "organizations" ? "name" : "title";
  const [rec] = await database.db.execute<{ id: string }>(
    sql`insert into ${sql.identifier("app")}.${sql.identifier(table)} (tenant_id, ${sql.identifier(column)}) values (${tenantId}, 'known') returning id`,
  );
  await database.db.execute(sql`
    insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
    values (${tenantId}, 'crm', ${ACCOUNT}, ${kind}, ${sourceId}, 'created', ${kind}, ${rec!.id}, ${runId}::uuid)`);
  return Number(rec!.id);
}

async function ledgerOf(tenantId: string, kind: string) {
  const rows = await database.db.execute<{
    source_id: string;
    action: string;
    reason: string | null;
    record_id: string | null;
  }>(sql`
    select source_id, action, reason, record_id::text as record_id from drover.ledger
     where tenant_id = ${tenantId} and kind = ${kind} order by source_id`);
  return new Map(rows.map((r) => [r.source_id, r]));
}

const v2Deals = { list: 0, page: 0, limit: 500, cursor: null };

describe("crm provider against recorded Pipedrive responses", () => {
  it("walks v2 deals by cursor with limit 500 and deleted ones included, the token only in the x-api-token header", async () => {
    const { runId, tenantId } = await newRun(["deals"]);
    const first = await runTask(runId, "deals", "deals:0:page:0", v2Deals);
    expect(first.outcome).toMatchObject({ status: "succeeded", summary: { created: 2, failed: 0 } });
    const [req] = first.requests;
    expect(req!.path).toBe("/api/v2/deals");
    expect(Object.fromEntries(req!.query)).toEqual({ status: "open,won,lost,deleted", limit: "500" });
    expect(req!.headers["x-api-token"]).toBe(TOKEN);
    expect(first.requests.every((r) => ![...r.query.values()].some((v) => v.includes(TOKEN)))).toBe(true);
    // The next cursor is the checkpoint: it becomes the successor task's position.
    expect(first.successors).toEqual([
      {
        kind: "deals",
        seed_key: "deals:0:page:1",
        cursor: { ...v2Deals, page: 1, cursor: "eyJkZWFsIjoxMDJ9" },
      },
    ]);

    const second = await runTask(runId, "deals", "deals:0:page:1b", first.successors[0]!.cursor);
    expect(second.requests[0]!.query.get("cursor")).toBe("eyJkZWFsIjoxMDJ9");
    expect(second.outcome).toMatchObject({ status: "succeeded", summary: { created: 1 } });
    expect(second.successors).toEqual([]); // next_cursor null: the list is done

    const deals = await database.db.execute<{
      title: string;
      status: string;
      archived: boolean;
      custom_fields: unknown;
    }>(
      sql`select title, status, archived, custom_fields from app.deals where tenant_id = ${tenantId} order by title`,
    );
    expect(deals).toEqual([
      {
        title: "Acme Widgets",
        status: "open",
        archived: false,
        // Every custom field of the record as v2 sends it; those without a value are left out.
        custom_fields: (fixture("v2-deals-page1") as { data: { custom_fields: unknown }[] }).data[0]!
          .custom_fields,
      },
      { title: "Deleted last week", status: "deleted", archived: false, custom_fields: null },
      { title: "Won and done", status: "won", archived: false, custom_fields: null },
    ]);
  });

  it("marks every deal of /api/v2/deals/archived archived", async () => {
    const { runId, tenantId } = await newRun(["deals"]);
    const { outcome, requests } = await runTask(runId, "deals", "deals:1:page:0", { ...v2Deals, list: 1 });
    expect(requests[0]!.path).toBe("/api/v2/deals/archived");
    expect(outcome).toMatchObject({ status: "succeeded", summary: { created: 1 } });
    const [deal] = await database.db.execute<{ archived: boolean }>(
      sql`select archived from app.deals where tenant_id = ${tenantId}`,
    );
    expect(deal!.archived).toBe(true);
  });

  it("reads v2 persons' primary email, an empty emails list as none, and v2 organizations' address object", async () => {
    const { runId, tenantId } = await newRun(["organizations", "persons"]);
    expect((await runTask(runId, "organizations", "o", v2Deals)).outcome).toMatchObject({
      status: "succeeded",
    });
    expect((await runTask(runId, "persons", "p", v2Deals)).outcome).toMatchObject({
      status: "succeeded",
      summary: { created: 2 },
    });
    const [company] = await database.db.execute<{ address: string; custom_fields: unknown }>(
      sql`select address, custom_fields from app.companies where tenant_id = ${tenantId}`,
    );
    expect(company).toEqual({
      address: "1 Main Street, Springfield",
      custom_fields: {
        f00dbabef00dbabef00dbabef00dbabef00dbabe: "Manufacturing",
        "0ff1ce000ff1ce000ff1ce000ff1ce000ff1ce00": expect.objectContaining({ subpremise: "Unit 3" }),
      },
    });
    const people = await database.db.execute<{ name: string; email: string | null; linked: boolean }>(
      sql`select name, email, company_id is not null as linked from app.contacts where tenant_id = ${tenantId} order by name`,
    );
    expect(people).toEqual([
      { name: "Ada Lovelace", email: "ada@example.com", linked: true },
      { name: "No Email Person", email: null, linked: false },
    ]);
  });

  it("links a v2 activity to each parent the ledger knows, a participant standing for the person, and skips one with none", async () => {
    const { runId, tenantId } = await newRun(["activities"]);
    const deal = await knownParent(tenantId, runId, "deals", "101");
    const ada = await knownParent(tenantId, runId, "persons", "201");
    const nobody = await knownParent(tenantId, runId, "persons", "202");
    const org = await knownParent(tenantId, runId, "organizations", "301");
    const lead = await knownParent(tenantId, runId, "leads", "adf21080-0e10-11eb-879b-05d71fb426ec");
    const { outcome, requests } = await runTask(runId, "activities", "a", v2Deals);
    // v2: no user_id parameter, so no "only the token owner's activities" trap.
    expect(requests[0]!.query.has("user_id")).toBe(false);
    expect(outcome).toMatchObject({ status: "succeeded", summary: { created: 2, skipped: 1 } });
    const rows = await database.db.execute<{
      subject: string;
      deal_id: string | null;
      contact_id: string | null;
      company_id: string | null;
      lead_id: string | null;
    }>(
      sql`select subject, deal_id, contact_id, company_id, lead_id from app.activities where tenant_id = ${tenantId} order by subject`,
    );
    expect(
      rows.map((r) => ({
        ...r,
        deal_id: Number(r.deal_id) || null,
        contact_id: Number(r.contact_id) || null,
        company_id: Number(r.company_id) || null,
        lead_id: Number(r.lead_id) || null,
      })),
    ).toEqual([
      { subject: "Call about renewal", deal_id: deal, contact_id: ada, company_id: org, lead_id: lead },
      {
        subject: "Lunch with a stranger",
        deal_id: null,
        contact_id: nobody,
        company_id: null,
        lead_id: null,
      },
    ]);
    expect((await ledgerOf(tenantId, "activities")).get("403")).toMatchObject({
      action: "skipped",
      reason: "not linked to any record",
    });
  });

  it("reads v1 leads with UUID ids, archived ones from /v1/leads/archived, and a data: null page as the end", async () => {
    const { runId, tenantId } = await newRun(["leads"]);
    const live = await runTask(runId, "leads", "l0", { list: 0, page: 0, stripes: 2, limit: 500 });
    expect(Object.fromEntries(live.requests[0]!.query)).toEqual({ start: "0", limit: "500" });
    expect(live.outcome).toMatchObject({ status: "succeeded", summary: { created: 1 } });
    const past = await runTask(runId, "leads", "l1", { list: 0, page: 1, stripes: 2, limit: 500 });
    expect(past.requests[0]!.query.get("start")).toBe("500");
    expect(past.outcome).toMatchObject({ status: "succeeded", summary: { attempted: 0 } });
    expect(past.successors).toEqual([]);
    const archived = await runTask(runId, "leads", "la", { list: 1, page: 0, stripes: 1, limit: 500 });
    expect(archived.requests[0]!.path).toBe("/v1/leads/archived");
    const leads = await database.db.execute<{
      title: string;
      archived: boolean;
      value_amount: string | null;
      custom_fields: unknown;
    }>(
      sql`select title, archived, value_amount::text, custom_fields from app.leads where tenant_id = ${tenantId} order by title`,
    );
    expect(leads).toEqual([
      { title: "Archived lead", archived: true, value_amount: null, custom_fields: null },
      {
        title: "Jane Doe Lead",
        archived: false,
        value_amount: "999.00",
        // Each field with its companions: the currency, the range's end, the time zone, the address parts.
        custom_fields: expect.objectContaining({
          "9dc80c50d78a15643bfc4ca79d76156a73a1ca0e": "from the webinar",
          c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00: 800,
          c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00_currency: "EUR",
          da7e0000da7e0000da7e0000da7e0000da7e0000_until: "2026-03-31",
          "71e0000071e0000071e0000071e0000071e00000_timezone_id": 151,
          add0e550add0e550add0e550add0e550add0e550_formatted_address: "1 Main St, Springfield, IL 62701, USA",
        }),
      },
    ]);
    expect([...(await ledgerOf(tenantId, "leads")).keys()].sort()).toEqual([
      "0b0a8e2e-5b7a-4b55-9a57-c5f0e2f9b001",
      "adf21080-0e10-11eb-879b-05d71fb426ec",
    ]);
  });

  it("links a v1 note to its deal, person, organization and lead, and skips one whose parents are unknown", async () => {
    const { runId, tenantId } = await newRun(["notes"]);
    const ids = [
      await knownParent(tenantId, runId, "deals", "101"),
      await knownParent(tenantId, runId, "persons", "201"),
      await knownParent(tenantId, runId, "organizations", "301"),
      await knownParent(tenantId, runId, "leads", "adf21080-0e10-11eb-879b-05d71fb426ec"),
    ];
    const { outcome } = await runTask(runId, "notes", "n", { list: 0, page: 0, stripes: 1, limit: 500 });
    expect(outcome).toMatchObject({ status: "succeeded", summary: { created: 1, skipped: 1 } });
    const [note] = await database.db.execute<Record<string, string>>(
      sql`select deal_id, contact_id, company_id, lead_id from app.notes where tenant_id = ${tenantId}`,
    );
    expect(Object.values(note!).map(Number)).toEqual(ids);
    expect((await ledgerOf(tenantId, "notes")).get("502")).toMatchObject({ action: "skipped" });
  });

  it("takes bodies from the per-deal list where the account honours include_body, with no per-message request", async () => {
    listBodies = true;
    const { runId, tenantId } = await newRun(["mail"]);
    await knownParent(tenantId, runId, "deals", "101");
    const { outcome, requests } = await runTask(runId, "mail", "m", { deals: ["101"], index: 0 });
    expect(outcome).toMatchObject({ status: "succeeded", summary: { created: 3 } });
    expect(requests.map((r) => r.path)).toEqual(["/v1/deals/101/mailMessages"]);
    expect(requests[0]!.query.get("include_body")).toBe("1");
    const bodies = await database.db.execute<{ subject: string; body: string | null }>(
      sql`select subject, body from app.emails where tenant_id = ${tenantId} order by subject`,
    );
    expect(bodies).toEqual([
      { subject: "Re: Re: Renewal", body: null },
      { subject: "Re: Renewal", body: null },
      { subject: "Renewal", body: "<p>Shall we renew?</p>" },
    ]);
    const [task] = await database.db.execute<{ cursor: { bodies?: string } }>(
      sql`select cursor from drover.tasks where run_id = ${runId}::uuid`,
    );
    expect(task!.cursor.bodies).toBe("list");
  });

  it("falls back to one GET /v1/mailbox/mailMessages/{id}?include_body=1 per message that has a body where the list sends none", async () => {
    listBodies = false;
    try {
      const { runId, tenantId } = await newRun(["mail"]);
      await knownParent(tenantId, runId, "deals", "101");
      const { outcome, requests } = await runTask(runId, "mail", "m", { deals: ["101"], index: 0 });
      expect(outcome).toMatchObject({ status: "succeeded", summary: { created: 3 } });
      const gets = requests.filter((r) => r.path.startsWith("/v1/mailbox/"));
      // 602 and 603 say has_body_flag 0: there is no body to ask for.
      expect(gets.map((r) => r.path)).toEqual(["/v1/mailbox/mailMessages/601"]);
      expect(gets.every((r) => r.query.get("include_body") === "1")).toBe(true);
      const bodies = await database.db.execute<{ body: string | null }>(
        sql`select body from app.emails where tenant_id = ${tenantId} order by body`,
      );
      expect(bodies.map((b) => b.body)).toEqual(["<p>fetched 601</p>", null, null]);
    } finally {
      listBodies = true;
    }
  });

  it("decides the body mode once per run: a later task follows the run's finding instead of asking again", async () => {
    listBodies = false;
    try {
      const { runId, tenantId } = await newRun(["mail"]);
      await knownParent(tenantId, runId, "deals", "101");
      await runTask(runId, "mail", "m1", { deals: ["101"], index: 0 });
      const [fact] = await database.db.execute<{ value: string }>(
        sql`select value from drover.run_facts where run_id = ${runId}::uuid and key = 'crm.mail.bodies'`,
      );
      expect(fact!.value).toBe("fetch");
      // A second task of the same run no longer asks its lists for bodies: the run knows they come per message.
      const { requests } = await runTask(runId, "mail", "m2", { deals: ["101"], index: 0 });
      const lists = requests.filter((r) => r.path.startsWith("/v1/deals/"));
      expect(lists.length).toBeGreaterThan(0);
      expect(lists.every((r) => r.query.get("include_body") === null)).toBe(true);
    } finally {
      listBodies = true;
    }
  });

  it("catches up with updated_since: a known row is updated in place, a new one created once, then the chain moves on", async () => {
    const { runId, tenantId } = await newRun(["deals"]);
    const known = await knownParent(tenantId, runId, "deals", "101");
    const since = "2026-11-30T00:00:00.000Z";
    const cursor = { ...v2Deals, stripes: 1, since, chain: ["notes"] };
    const { outcome, requests, successors } = await runTask(
      runId,
      "deals",
      "catch-up:deals:0:page:0",
      cursor,
    );
    expect(requests[0]!.query.get("updated_since")).toBe(since);
    expect(outcome).toMatchObject({ status: "succeeded", summary: { created: 1, alreadyHere: 1 } });
    const rows = await database.db.execute<{ id: string; title: string; status: string }>(
      sql`select id, title, status from app.deals where tenant_id = ${tenantId} order by id`,
    );
    expect(rows.map((r) => ({ ...r, id: Number(r.id) }))).toEqual([
      { id: known, title: "Acme Widgets", status: "open" },
      { id: known + 1, title: "Deleted last week", status: "deleted" },
    ]);
    expect(successors.map((s) => s.seed_key)).toEqual(["catch-up:deals:0:page:1"]);
    expect(successors[0]!.cursor).toMatchObject({ since, chain: ["notes"], cursor: "eyJkZWFsIjoxMDJ9" });
  });

  it("splits v2 deals with one sorted one-row request keeping the list's status, then walks each partition with updated_since and updated_until", async () => {
    const { runId } = await newRun(["deals"]);
    const split = await runTask(runId, "deals", "deals:0:split", { ...v2Deals, split: 2 });
    expect(split.outcome).toMatchObject({ status: "succeeded", summary: { attempted: 0 } });
    expect(split.requests.map((r) => [r.path, Object.fromEntries(r.query)])).toEqual([
      [
        "/api/v2/deals",
        { status: "open,won,lost,deleted", limit: "1", sort_by: "update_time", sort_direction: "asc" },
      ],
    ]);
    expect(split.successors.map((s) => s.seed_key)).toEqual([
      "deals:0:part:0of2:page:0",
      "deals:0:part:1of2:page:0",
    ]);
    const [lower, upper] = split.successors.map((s) => s.cursor.partition as Record<string, string>);
    expect(lower!.since).toBe("2025-06-01T08:00:00.000Z");
    expect(upper!.since).toBe(lower!.until);
    expect(split.successors[0]!.cursor).not.toHaveProperty("split");

    const chain = await runTask(runId, "deals", "deals:0:part:1of2:page:0b", split.successors[1]!.cursor);
    expect(Object.fromEntries(chain.requests[0]!.query)).toEqual({
      status: "open,won,lost,deleted",
      limit: "500",
      updated_since: upper!.since,
      updated_until: upper!.until,
    });
    expect(chain.successors.map((s) => s.seed_key)).toEqual(["deals:0:part:1of2:page:1"]);
    expect(chain.successors[0]!.cursor).toMatchObject({ partition: upper, cursor: "eyJkZWFsIjoxMDJ9" });
  });

  it("follows a cursor past an empty page until next_cursor is null", async () => {
    const { runId, tenantId } = await newRun(["deals"]);
    const cursor = { ...v2Deals, list: 1, stripes: 1, since: EMPTY_THEN_MORE, chain: [] };
    const empty = await runTask(runId, "deals", "e0", cursor);
    expect(empty.outcome).toMatchObject({ status: "succeeded", summary: { attempted: 0 } });
    expect(empty.successors.map((s) => s.cursor.cursor)).toEqual(["eyJpZCI6NTAwfQ"]);
    const rest = await runTask(runId, "deals", "e1", empty.successors[0]!.cursor);
    expect(rest.outcome).toMatchObject({ status: "succeeded", summary: { created: 1 } });
    // The archived list was the kind's last and the chain is empty: the catch-up ends here.
    expect(rest.successors).toEqual([]);
    expect((await ledgerOf(tenantId, "deals")).has("104")).toBe(true);
  });
});
