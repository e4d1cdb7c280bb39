import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { hubspotRedrive, listBatches, readProperties, readWholeList } from "../src/index.js";
import { clientOf, sandbox } from "./helpers.js";
import { drainPhases, drainSeeds, hubspotTestAccount, insertHubSpotRun } from "./hubspot-run.js";

/**
 * The provider's writes through the engine in process (real Postgres, the HubSpot sandbox): a
 * contact is matched by email to the one the product already has, as Pipedrive's persons are, and
 * its deals link to that one; a re-drive reads rows again by id, archived ones included, and names
 * one the source no longer has.
 */
const account = hubspotTestAccount("hubspot-provider");
const TENANT = "hs-provider";
let url = "";
let runId = "";
let existing = 0;
let matchedContact = "";

beforeAll(async () => {
  const s = await sandbox({ companies: 30, contacts: 40, deals: 30, engagements: 0, archivedRate: 0.2 });
  url = s.url;
  // A contact the product already has, under the email of a live HubSpot contact (another case).
  const client = clientOf(s);
  const props = await readProperties(client, "contacts");
  const rows = await readWholeList(client, "contacts", {
    archived: false,
    batches: listBatches(client, "contacts", props.names),
  });
  const withEmail = rows.flatMap((r) => ("record" in r && r.record.properties.email ? [r.record] : []))[0]!;
  matchedContact = withEmail.id;
  const [row] = await account.db.execute<{ id: string }>(sql`
    insert into app.contacts (tenant_id, name, email) values (${TENANT}, 'Already here', ${withEmail.properties.email!.toUpperCase()})
    returning id::text`);
  existing = Number(row!.id);
  runId = await insertHubSpotRun(account.db, account.secrets, {
    tenantId: TENANT,
    sourceAccount: "hs",
    baseUrl: url,
  });
  await drainPhases(account.db, account.secrets, runId, 0, 2);
});

async function slot(kind: string, id: string) {
  const [row] = await account.db.execute<{
    action: string;
    record_id: string | null;
    record_type: string | null;
  }>(sql`
    select action, record_id::text, record_type from drover.ledger
     where tenant_id = ${TENANT} and kind = ${kind} and source_id = ${id}`);
  return row;
}

describe("the hubspot provider's writes", () => {
  it("matches a contact to the product's own by email, whatever its case, and links its deals to it", async () => {
    expect(await slot("contacts", matchedContact)).toMatchObject({
      action: "matched",
      record_id: String(existing),
      record_type: "contact",
    });
    const [kept] = await account.db.execute<{ name: string }>(
      sql`select name from app.contacts where id = ${existing}`,
    );
    expect(kept!.name).toBe("Already here");
    const deals = await account.db.execute<{ contact_id: string }>(sql`
      select d.contact_id::text from drover.ledger l join app.deals d on d.id = l.record_id
       where l.tenant_id = ${TENANT} and l.kind = 'deals' and d.contact_id = ${existing}`);
    const links = await fetch(`${url}/__sandbox/truth`).then(
      (r) => r.json() as Promise<{ links: Record<string, [string, string][]> }>,
    );
    const expected = links.links["deals:contacts"]!.filter(
      ([, contact]) => contact === matchedContact,
    ).length;
    expect(deals.length).toBe(expected);
  });

  it("re-drives rows by id: a live one and an archived one are written again, one the source lacks is named", async () => {
    const truth = await fetch(`${url}/__sandbox/truth`).then(
      (r) => r.json() as Promise<{ types: Record<string, { live: string[]; archived: string[] }> }>,
    );
    const live = truth.types.companies!.live[0]!;
    const archived = truth.types.companies!.archived[0]!;
    // As if both had failed: no ledger row, no product row.
    for (const id of [live, archived]) {
      const held = await slot("companies", id);
      await account.db.execute(sql`delete from app.companies where id = ${Number(held!.record_id)}`);
      await account.db.execute(
        sql`delete from drover.ledger where tenant_id = ${TENANT} and kind = 'companies' and source_id = ${id}`,
      );
    }
    const gone = "1999999999";
    expect(hubspotRedrive.reads("companies")).toBe("by-id");
    expect(hubspotRedrive.refuses("leads")).toMatch(/no rows of kind "leads"/);
    const seeds = hubspotRedrive.seeds(
      "companies",
      [live, archived, gone].map((sourceId) => ({ sourceId })),
      "t1",
    );
    expect(seeds.map((s) => s.seedKey)).toEqual(["redrive:t1:companies:0"]);
    await drainSeeds(account.db, account.secrets, runId, seeds, 4);

    for (const id of [live, archived]) expect((await slot("companies", id))?.action, id).toBe("created");
    const [row] = await account.db.execute<{ deleted_at: Date | null }>(sql`
      select c.deleted_at from app.companies c
       where c.id = ${Number((await slot("companies", archived))!.record_id)}`);
    expect(row!.deleted_at).not.toBeNull();
    expect(await slot("companies", gone)).toBeUndefined();
    const notes = await account.db.execute<{ reason: string }>(sql`
      select reason from drover.notes where run_id = ${runId}::uuid and kind = 'companies' and subject_id = ${gone}`);
    expect(notes.map((n) => n.reason).join(" ")).toMatch(/no longer in the source/);
  });
});
