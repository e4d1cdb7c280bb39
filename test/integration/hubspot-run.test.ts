import { type HubSpotSandbox, startSandbox, type Truth } from "@drover/hubspot-sandbox";
import { Code, RunStatus, timestampDate } from "@drover/proto";
import {
  HubSpotClient,
  hubspotProvider,
  listBatches,
  OBJECT_TYPES,
  type ObjectType,
  readProperties,
  readWholeList,
} from "@drover/source-hubspot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, rejection, startCluster, until, untilFinished } from "../support/in-process.js";

/**
 * A HubSpot run through the whole engine (coordinator, two workers, Postgres, JetStream) against the
 * HubSpot sandbox: every live and archived record of every type lands once, linked as the sandbox's
 * truth says, with its custom properties and its deletion mark; a round of changes made while the
 * run reads is applied by the catch-up; a second run finds everything already here.
 */

const TENANT = "hs-tenant";
const ACCOUNT = "hs-acct";
const NOT_LINKED = "not linked to any record";
/**
 * The round of changes lands after this many API requests: past the companies' and the contacts'
 * phases (a properties read, a live and an archived page, and for contacts their company
 * associations: about a dozen requests), so their edits and additions reach the product only
 * through the catch-up.
 */
const CHANGES_AFTER_REQUESTS = 16;

let c: Cluster;
let hs: HubSpotSandbox;
let truth: Truth;

beforeAll(async () => {
  // The crm sandbox the cluster starts is not used: the smallest account it allows.
  c = await startCluster({ workers: 2, laneWidth: 2, sandbox: { organizations: 1, persons: 1, deals: 1 } });
  hs = await startSandbox({
    companies: 60,
    contacts: 120,
    deals: 80,
    engagements: 40,
    archivedRate: 0.1,
    customProperties: 5,
    changeEdits: 3,
    changeAdds: 2,
    changesAfterRequests: CHANGES_AFTER_REQUESTS,
  });
});
afterAll(async () => {
  await hs?.close();
  await c?.close();
});

/** The first tenant's runs walk a page a task (many tasks, both workers); the others the default 10. */
async function startHubSpotRun(tenantId = TENANT, dryRun = false): Promise<string> {
  const settings: Record<string, string> = tenantId === TENANT ? { pagesPerTask: "1" } : {};
  const { run } = await c.client.startRun({
    tenantId,
    dryRun,
    source: "hubspot",
    sourceAccount: ACCOUNT,
    kinds: [],
    sourceConfig: { baseUrl: hs.url, apiToken: "hubspot-test-token", settings },
  });
  return run!.id;
}

type Slot = { action: string; recordType: string | null; recordId: number | null; reason: string | null };

async function ledger(kind: string): Promise<Map<string, Slot>> {
  const rows = await c.database.sql<
    {
      source_id: string;
      action: string;
      record_type: string | null;
      record_id: string | null;
      reason: string | null;
    }[]
  >`
    select source_id, action, record_type, record_id::text, reason from drover.ledger
     where tenant_id = ${TENANT} and source = 'hubspot' and source_account = ${ACCOUNT} and kind = ${kind}`;
  return new Map(
    rows.map((r) => [
      r.source_id,
      {
        action: r.action,
        recordType: r.record_type,
        recordId: r.record_id === null ? null : Number(r.record_id),
        reason: r.reason,
      },
    ]),
  );
}

/** The product tables the HubSpot source writes, by record type: the provider's own revert map. */
const TABLES = hubspotProvider.productRecords!.tables;

type ProductRow = Record<string, unknown> & { id: string };

async function productRows(recordType: string): Promise<Map<number, ProductRow>> {
  const rows = await c.database.sql<ProductRow[]>`
    select *, id::text as id from ${c.database.sql(TABLES[recordType]!)} where tenant_id = ${TENANT}`;
  return new Map(rows.map((r) => [Number(r.id), r]));
}

async function productCounts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [type, table] of Object.entries(TABLES)) {
    const [row] = await c.database.sql<{ n: number }[]>`
      select count(*)::int as n from ${c.database.sql(table)} where tenant_id = ${TENANT}`;
    out[type] = row!.n;
  }
  return out;
}

/** A pair's links as the truth says them: child id → parent id. */
function linksOf(child: ObjectType, parent: ObjectType): Map<string, string> {
  return new Map(truth.links[`${child}:${parent}`] ?? []);
}

/** The product id of a parent record the ledger holds, or null. */
function recordOf(slots: Map<string, Slot>, id: string | undefined): number | null {
  return id === undefined ? null : (slots.get(id)?.recordId ?? null);
}

const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));

describe("a HubSpot run through the engine", { timeout: 120_000 }, () => {
  let firstCounts: Record<string, number> = {};
  let firstRunId = "";
  let dryTenantRun = "";
  let dryTenantCounts: () => Promise<number> = async () => 0;

  it("refuses a bad config at StartRun with the provider's sentence, and starts nothing", async () => {
    const table: [Record<string, string>, string, RegExp][] = [
      [{}, "not a url", /base_url "not a url" is not a URL; give https:\/\/api.hubapi.com/],
      [{ dailyResetTimeZone: "Nowhere/Land" }, hs.url, /dailyResetTimeZone must be an IANA time zone/],
      [
        { pageSize: "100" },
        hs.url,
        /unknown hubspot setting "pageSize"; known: dailyResetTimeZone, daySeconds/,
      ],
    ];
    for (const [settings, baseUrl, sentence] of table) {
      const err = await rejection(
        c.client.startRun({
          tenantId: "hs-refused",
          source: "hubspot",
          sourceAccount: ACCOUNT,
          kinds: [],
          sourceConfig: { baseUrl, apiToken: "hubspot-test-token", settings },
        }),
      );
      expect(err.code, JSON.stringify(settings)).toBe(Code.INVALID_ARGUMENT);
      expect(err.message).toMatch(sentence);
    }
    const [row] = await c.database.sql<
      { n: number }[]
    >`select count(*)::int as n from drover.runs where tenant_id = 'hs-refused'`;
    expect(row!.n).toBe(0);
  });

  it("ends exact: every live and archived record once, linked as the source links it, custom fields kept, archived flagged, mid-run changes caught up", async () => {
    const runId = await startHubSpotRun();
    firstRunId = runId;
    const run = await untilFinished(c, runId, 100_000);
    expect(run.status, run.error).toBe(RunStatus.SUCCEEDED);
    truth = hs.truth();
    // The round of changes was made while the run read: it added two records of every type.
    expect(truth.types.companies.live.length + truth.types.companies.archived.length).toBe(62);

    const slots = Object.fromEntries(
      await Promise.all(OBJECT_TYPES.map(async (t) => [t, await ledger(t)] as const)),
    ) as Record<ObjectType, Map<string, Slot>>;
    const products = Object.fromEntries(
      await Promise.all(Object.keys(TABLES).map(async (t) => [t, await productRows(t)] as const)),
    ) as Record<string, Map<number, ProductRow>>;

    for (const type of OBJECT_TYPES) {
      const { live, archived } = truth.types[type];
      expect(live.length, type).toBeGreaterThan(0);
      const all = [...live, ...archived];
      // Every record in the ledger, none invented.
      expect([...slots[type].keys()].sort(), `${type}: ledger vs source`).toEqual([...all].sort());
      // Each created slot is one product row of its own.
      const created = [...slots[type].values()].filter((s) => s.action === "created");
      expect(new Set(created.map((s) => `${s.recordType}:${s.recordId}`)).size, type).toBe(created.length);
      for (const s of created)
        expect(products[s.recordType!]!.has(s.recordId!), `${type} ${s.recordType}`).toBe(true);
    }
    expect(truth.types.companies.archived.length).toBeGreaterThan(0);

    // Contacts: one each (the sandbox's emails are unique), linked to their company.
    const contactCompany = linksOf("contacts", "companies");
    for (const id of [...truth.types.contacts.live, ...truth.types.contacts.archived]) {
      const slot = slots.contacts.get(id)!;
      expect(slot.action, `contact ${id}`).toBe("created");
      const row = products.contact!.get(slot.recordId!)!;
      expect(num(row.company_id), `contact ${id} company`).toBe(
        recordOf(slots.companies, contactCompany.get(id)),
      );
    }
    // Deals: their contact and company.
    const dealContact = linksOf("deals", "contacts");
    const dealCompany = linksOf("deals", "companies");
    for (const id of [...truth.types.deals.live, ...truth.types.deals.archived]) {
      const row = products.deal!.get(slots.deals.get(id)!.recordId!)!;
      expect(num(row.contact_id), `deal ${id} contact`).toBe(recordOf(slots.contacts, dealContact.get(id)));
      expect(num(row.company_id), `deal ${id} company`).toBe(recordOf(slots.companies, dealCompany.get(id)));
      // HubSpot's archived is its recycle bin: the deal is kept as deleted, as Pipedrive's.
      const archived = truth.types.deals.archived.includes(id);
      expect(row.status === "deleted", `deal ${id} deleted`).toBe(archived);
    }
    // Engagements: every association the truth has, in the table their kind goes to.
    for (const type of ["notes", "emails", "calls", "tasks", "meetings"] as const) {
      const deal = linksOf(type, "deals");
      const contact = linksOf(type, "contacts");
      const company = linksOf(type, "companies");
      for (const id of [...truth.types[type].live, ...truth.types[type].archived]) {
        const slot = slots[type].get(id)!;
        if (!deal.has(id) && !contact.has(id) && !company.has(id)) {
          expect(slot, `${type} ${id} has no link`).toMatchObject({ action: "skipped", reason: NOT_LINKED });
          continue;
        }
        const expected =
          type === "notes" ? "note" : type === "emails" ? (deal.has(id) ? "email" : "activity") : "activity";
        expect(slot.recordType, `${type} ${id}`).toBe(expected);
        const row = products[expected]!.get(slot.recordId!)!;
        expect(num(row.deal_id), `${type} ${id} deal`).toBe(recordOf(slots.deals, deal.get(id)));
        if (expected === "email") continue;
        expect(num(row.contact_id), `${type} ${id} contact`).toBe(recordOf(slots.contacts, contact.get(id)));
        expect(num(row.company_id), `${type} ${id} company`).toBe(recordOf(slots.companies, company.get(id)));
        if (expected === "activity")
          expect(row.type).toBe(
            (
              { emails: "email", calls: "call", tasks: "task", meetings: "meeting" } as Record<string, string>
            )[type],
          );
      }
    }
    // Both of an email's tables are exercised: with its deal, and as an activity without one.
    const emailTypes = [...slots.emails.values()].map((s) => s.recordType);
    expect(emailTypes).toContain("email");
    expect(emailTypes).toContain("activity");
    // Archived records carry their deletion mark; live ones none.
    for (const [type, recordType] of [
      ["companies", "company"],
      ["contacts", "contact"],
      ["notes", "note"],
    ] as const) {
      for (const [id, slot] of slots[type]) {
        if (slot.action !== "created") continue;
        const row = products[recordType]!.get(slot.recordId!)!;
        const archived = truth.types[type].archived.includes(id);
        expect(row.deleted_at !== null, `${type} ${id} deleted_at`).toBe(archived);
      }
    }

    // Companies as the source has them now, the round's edits included: names and custom fields.
    const client = new HubSpotClient({ baseUrl: hs.url, token: "hubspot-test-token", account: "verify" });
    const props = await readProperties(client, "companies");
    const batches = listBatches(client, "companies", props.names);
    let edited = 0;
    for (const archived of [false, true]) {
      for (const row of await readWholeList(client, "companies", { archived, batches })) {
        if (!("record" in row)) throw new Error("the sandbox sent a malformed company");
        const { record } = row;
        const product = products.company!.get(slots.companies.get(record.id)!.recordId!)!;
        // An archived record is never found by search: an edit made to it after its list was read
        // is not the import's to catch (a follow run's archived walk is).
        if (!archived) {
          expect(product.name, `company ${record.id} name`).toBe(record.properties.name);
          if (String(record.properties.name).includes("(edited")) edited++;
        }
        const custom = Object.fromEntries(
          [...props.custom].flatMap((k) => (record.properties[k] ? [[k, record.properties[k]]] : [])),
        );
        expect(product.custom_fields ?? {}, `company ${record.id} custom fields`).toEqual(custom);
      }
    }
    expect(edited, "companies the mid-run round edited").toBeGreaterThan(0);
    firstCounts = await productCounts();
  });

  it("verifies against the source: every type's rows accounted for, a sample compared column by column, and a record changed behind the run's back named", async () => {
    expect(firstRunId).not.toBe("");
    const { verification } = await c.client.verifyRun({ runId: firstRunId });
    expect(verification!.error).toBe("");
    const kinds = new Map(verification!.kinds.map((k) => [k.kind, k]));
    for (const type of OBJECT_TYPES) {
      const k = kinds.get(type)!;
      expect(k, type).toBeDefined();
      expect(k.mismatches, type).toEqual([]);
      expect(k.sourceCount, type).toBe(
        BigInt(truth.types[type].live.length + truth.types[type].archived.length),
      );
      expect(k.sampled, type).toBeGreaterThan(0n);
    }
    expect(verification!.ok).toBe(true);

    // A company renamed and a deal's value changed in the product, not at the source.
    const [company] = await c.database.sql<{ record_id: string; name: string }[]>`
      select l.record_id::text, p.name from drover.ledger l join app.companies p on p.id = l.record_id
       where l.tenant_id = ${TENANT} and l.source = 'hubspot' and l.kind = 'companies' and l.action = 'created'
       order by l.source_id limit 1`;
    const [deal] = await c.database.sql<{ record_id: string; source_id: string }[]>`
      select l.record_id::text, l.source_id from drover.ledger l join app.deals d on d.id = l.record_id
       where l.tenant_id = ${TENANT} and l.source = 'hubspot' and l.kind = 'deals' and l.action = 'created'
         and d.value is not null
       order by l.source_id limit 1`;
    await c.database.sql`update app.companies set name = 'Renamed by hand' where id = ${company!.record_id}`;
    await c.database.sql`update app.deals set value = value + 1 where id = ${deal!.record_id}`;
    try {
      const { verification: again } = await c.client.verifyRun({ runId: firstRunId });
      expect(again!.ok).toBe(false);
      const mismatches = again!.kinds.flatMap((k) => k.mismatches);
      expect(mismatches).toContainEqual(
        expect.stringMatching(
          new RegExp(`name is "[^"]+" in the source but "Renamed by hand" in company ${company!.record_id}$`),
        ),
      );
      expect(mismatches).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^${deal!.source_id}: value is "[\\d.]+" in the source but "[\\d.]+" in deal ${deal!.record_id}$`,
          ),
        ),
      );
      expect(mismatches).toHaveLength(2);
    } finally {
      await c.database.sql`update app.deals set value = value - 1 where id = ${deal!.record_id}`;
      await c.database.sql`update app.companies set name = ${company!.name} where id = ${company!.record_id}`;
    }
  });

  it("a second run for the same tenant writes nothing new: every row already here", async () => {
    expect(firstCounts.company).toBeGreaterThan(0);
    const runId = await startHubSpotRun();
    const run = await untilFinished(c, runId, 100_000);
    expect(run.status, run.error).toBe(RunStatus.SUCCEEDED);
    for (const type of OBJECT_TYPES) {
      const p = run.progress.find((x) => x.kind === type)!;
      expect(p.imported, `${type}: imported`).toBe(0n);
      expect(p.matched, `${type}: matched`).toBe(0n);
    }
    expect(await productCounts()).toEqual(firstCounts);
  });
  it("a dry run writes nothing and predicts, kind by kind, what the real run then does", async () => {
    const dryTenant = "hs-dry";
    const counts = async () =>
      (
        await c.database.sql<{ n: number }[]>`
        select (select count(*) from app.companies where tenant_id = ${dryTenant})
             + (select count(*) from app.contacts where tenant_id = ${dryTenant})
             + (select count(*) from app.deals where tenant_id = ${dryTenant})
             + (select count(*) from app.notes where tenant_id = ${dryTenant})
             + (select count(*) from app.activities where tenant_id = ${dryTenant})
             + (select count(*) from app.emails where tenant_id = ${dryTenant}) as n`
      )[0]!.n;
    const dry = await untilFinished(c, await startHubSpotRun(dryTenant, true), 100_000);
    expect(dry.status, dry.error).toBe(RunStatus.SUCCEEDED);
    expect(Number(await counts())).toBe(0);
    const predicted = new Map(dry.dryRunReport!.kinds.map((k) => [k.kind, k]));
    const real = await untilFinished(c, await startHubSpotRun(dryTenant), 100_000);
    expect(real.status, real.error).toBe(RunStatus.SUCCEEDED);
    dryTenantRun = real.id;
    dryTenantCounts = counts;
    for (const p of real.progress) {
      const d = predicted.get(p.kind)!;
      expect({ kind: p.kind, created: d.wouldCreate, skipped: d.wouldSkip, failed: d.wouldFail }).toEqual({
        kind: p.kind,
        created: p.imported,
        skipped: p.skipped,
        failed: p.failed,
      });
    }
    expect(predicted.get("contacts")!.wouldCreate).toBeGreaterThan(0n);
  });
  it("a revert removes exactly what the run created, every table, through the shared revert map", async () => {
    expect(dryTenantRun).not.toBe("");
    const created = Number(await dryTenantCounts());
    expect(created).toBeGreaterThan(0);
    const { run: started } = await c.client.revertRun({ runId: dryTenantRun });
    const revert = await untilFinished(c, started!.id, 100_000);
    expect(revert.status, revert.error).toBe(RunStatus.SUCCEEDED);
    expect(revert.revert?.removed).toBe(BigInt(created));
    expect(revert.revert?.kept).toBe(0n);
    expect(Number(await dryTenantCounts())).toBe(0);
  });

  it("follows by polling: edits, additions and archives made after the import reach the product by a pass, and CompleteRun ends exact", async () => {
    const tenantId = "hs-follow";
    const { run } = await c.client.startRun({
      tenantId,
      source: "hubspot",
      sourceAccount: ACCOUNT,
      kinds: [],
      sourceConfig: { baseUrl: hs.url, apiToken: "hubspot-test-token", settings: {} },
      follow: true,
      followIntervalSeconds: 1,
    });
    const runId = run!.id;
    // The import is its first pass: once it finished, the source changes.
    await until(
      async () => (await c.client.getRun({ runId })).run!.follow?.passes.some((p) => p.finishedAt),
      90_000,
      "the import to finish",
    );
    const before = hs.truth();
    // HubSpot's delete: archived records leave the live list and search, their modification time unmoved.
    const changed = hs.applyChanges(undefined, { archives: 2 });
    const changedAt = Date.parse(changed.at);
    await until(
      async () =>
        (await c.client.getRun({ runId })).run!.follow?.passes.some(
          (p) => p.finishedAt && p.startsAt && timestampDate(p.startsAt).getTime() > changedAt,
        ),
      90_000,
      "a pass begun after the changes to finish",
    );
    await c.client.completeRun({ runId });
    const last = await untilFinished(c, runId, 90_000);
    expect(last.status, last.error).toBe(RunStatus.SUCCEEDED);

    const now = hs.truth();
    for (const type of OBJECT_TYPES) {
      const rows = await c.database.sql<{ source_id: string }[]>`
        select source_id from drover.ledger
         where tenant_id = ${tenantId} and source = 'hubspot' and source_account = ${ACCOUNT} and kind = ${type}`;
      const all = [...now.types[type].live, ...now.types[type].archived];
      expect(rows.map((r) => r.source_id).sort(), `${type}: ledger vs source`).toEqual([...all].sort());
      // Every record the round archived is marked deleted, on the ledger and on Drover's record;
      // no live one is.
      const archivedNow = new Set(now.types[type].archived);
      const newlyArchived = [...archivedNow].filter((id) => !before.types[type].archived.includes(id));
      expect(newlyArchived.length, `${type}: records the round archived`).toBeGreaterThan(0);
      const marks = await c.database.sql<
        { source_id: string; gone: boolean; record_type: string; record_id: string }[]
      >`
        select source_id, source_deleted_at is not null as gone, record_type, record_id::text
          from drover.ledger
         where tenant_id = ${tenantId} and kind = ${type} and action = 'created'`;
      const deletedRecords = new Set<string>();
      for (const recordType of new Set(marks.map((m) => m.record_type))) {
        const rows = await c.database.sql<{ id: string }[]>`
          select id::text from ${c.database.sql(TABLES[recordType]!)}
           where tenant_id = ${tenantId} and deleted_at is not null`;
        for (const r of rows) deletedRecords.add(`${recordType}:${r.id}`);
      }
      for (const m of marks) {
        if (newlyArchived.includes(m.source_id)) {
          expect(m.gone, `${type} ${m.source_id} archived at the source`).toBe(true);
          expect(
            deletedRecords.has(`${m.record_type}:${m.record_id}`),
            `${type} ${m.source_id} Drover's record`,
          ).toBe(true);
        } else if (!archivedNow.has(m.source_id)) {
          expect(m.gone, `${type} ${m.source_id} live at the source`).toBe(false);
        }
      }
    }
    // The round's edits: every live company's name as the source has it now.
    const client = new HubSpotClient({
      baseUrl: hs.url,
      token: "hubspot-test-token",
      account: "follow-check",
    });
    const names = new Map(
      (await readWholeList(client, "companies", { archived: false, batches: [["name"]] })).flatMap((r) =>
        "record" in r ? [[r.record.id, r.record.properties.name] as const] : [],
      ),
    );
    const stored = await c.database.sql<{ source_id: string; name: string }[]>`
      select l.source_id, p.name from drover.ledger l join app.companies p on p.id = l.record_id
       where l.tenant_id = ${tenantId} and l.kind = 'companies' and l.action = 'created'`;
    const edited = [...names.values()].filter((n) => String(n).includes(`(edited ${changed.round})`));
    expect(edited.length).toBeGreaterThan(0);
    for (const row of stored)
      if (names.has(row.source_id)) expect(row.name, row.source_id).toBe(names.get(row.source_id));
  });
});
