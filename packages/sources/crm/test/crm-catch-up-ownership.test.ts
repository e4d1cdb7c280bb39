import type { Sandbox } from "@drover/crm-sandbox";
import { claimTask, seedContext, toRunInfo, writeBatches } from "@drover/engine";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { CATCH_UP } from "../src/lists.js";
import { crmProvider } from "../src/provider.js";
import { type Person, parsePerson } from "../src/records.js";
import { companyKind, independentBatch } from "../src/writers.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * Ownership in the catch-up pass (invariant 8), against the sandbox and real Postgres: a person the
 * run matched to a contact it did not create (another person's with the same email, or one the
 * product already had) and that the customer edits mid-run only fills what is empty on that
 * contact, never overwrites it, and says so in a note; a contact the run created is still updated.
 */
let sandbox: Sandbox;
const account = crmTestAccount("ownership");
const { token: TOKEN, secrets } = account;
const tenantId = "ownership";
const KINDS = ["organizations", "persons"];

beforeAll(async () => {
  // Seed 7 with 100 persons and 10 edits: person 21 repeats person 18's email, and only 21 is edited.
  sandbox = await account.sandbox({
    seed: 7,
    organizations: 20,
    persons: 100,
    deals: 0,
    leads: 0,
    activities: 0,
    notes: 0,
    mailPerDealMax: 0,
    changeEdits: 10,
  });
});

async function sourcePersons(): Promise<Map<string, Person>> {
  const res = await fetch(`${sandbox.url}/api/v2/persons?limit=500`, { headers: { "x-api-token": TOKEN } });
  const body = (await res.json()) as { data: { id: number }[] };
  return new Map(body.data.map((r) => [String(r.id), parsePerson(r)]));
}

type ContactRow = {
  id: string;
  name: string;
  email: string | null;
  phone: string | null;
  company_id: string | null;
  custom_fields: Record<string, unknown> | null;
};

async function contactOf(personId: string): Promise<ContactRow & { action: string }> {
  const [row] = await account.db.execute<ContactRow & { action: string }>(sql`
    select c.id::text, c.name, c.email, c.phone, c.company_id::text, c.custom_fields, l.action
      from drover.ledger l join app.contacts c on c.id = l.record_id
     where l.tenant_id = ${tenantId} and l.kind = 'persons' and l.source_id = ${personId}`);
  return row!;
}

describe("the catch-up pass and records Drover did not create", () => {
  it("fills only what is empty on a matched contact, keeps the rest, notes it; a created contact is updated", async () => {
    const before = await sourcePersons();
    // The shared-email pair: the second person is matched to the first one's contact.
    const [second, first] = ["21", "18"];
    expect(before.get(second)!.email).toBe(before.get(first)!.email);
    expect(before.get(second)!.phone).not.toBeNull();
    // A contact the product already had: the email of a person the change set will edit (ids 1,
    // 11, 21, ... of 100 with 10 edits), one with a phone and an email of its own.
    const emailCount = (email: string | null) => [...before.values()].filter((p) => p.email === email).length;
    const preexisting = ["1", "11", "31", "41", "51"].find((id) => {
      const p = before.get(id)!;
      return p.email !== null && p.phone !== null && emailCount(p.email) === 1;
    })!;
    const theirs = before.get(preexisting)!;
    const [own] = await account.db.execute<{ id: string }>(sql`
      insert into app.contacts (tenant_id, name, email, phone, custom_fields)
      values (${tenantId}, 'Their own name', ${theirs.email!.toUpperCase()}, null, '{"theirs": "kept"}'::jsonb)
      returning id::text`);

    // The run started a moment ago, on a whole second: the change set lands after it.
    const startedAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 2000);
    const runId = await insertCrmRun(account.db, secrets, {
      tenantId,
      sourceAccount: "ownership",
      kinds: KINDS,
      baseUrl: sandbox.url,
      token: TOKEN,
      settings: { pageSize: "50" },
      startedAt,
    });
    const run = toRunInfo(
      (await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!,
    );
    const seeds = await crmProvider.seedPhase(seedContext(undefined as never, run, 0, KINDS));
    await drainTasks(account.db, secrets, runId, seeds);

    const pair = await contactOf(second);
    expect(pair.action).toBe("matched");
    expect((await contactOf(first)).action).toBe("created");
    expect((await contactOf(preexisting)).id).toBe(own!.id);
    expect((await contactOf(preexisting)).action).toBe("matched");
    // The product's user clears the phone of the pair's contact: an empty field the catch-up may fill.
    await account.db.execute(sql`update app.contacts set phone = null where id = ${pair.id}::bigint`);
    const pairBefore = await contactOf(second);

    expect(sandbox.applyChanges()).toBe(true);
    const truth = sandbox.truth(["organizations", "persons"]).kinds;
    const edited = truth.persons.edited;
    expect(edited).toEqual(expect.arrayContaining([second, preexisting]));
    expect(edited).not.toContain(first);
    const after = await sourcePersons();
    const catchUp = await crmProvider.seedPhase(seedContext(undefined as never, run, 1, [CATCH_UP]));
    const { summary } = await drainTasks(account.db, secrets, runId, catchUp, 1);
    // Each edited row is applied to the record the ledger holds: already here, nothing created.
    expect(summary).toMatchObject({
      created: 0,
      matched: 0,
      alreadyHere: edited.length + truth.organizations.edited.length,
      failed: 0,
    });

    // The shared-email contact keeps the first person's name and email; its cleared phone is filled.
    const pairAfter = await contactOf(second);
    expect(pairAfter).toMatchObject({
      id: pairBefore.id,
      name: before.get(first)!.name,
      email: pairBefore.email,
      custom_fields: pairBefore.custom_fields,
      phone: after.get(second)!.phone,
    });
    expect(pairAfter.name).not.toBe(after.get(second)!.name);
    // The contact the product already had keeps its name, email and custom fields; its phone is filled.
    const theirsAfter = await contactOf(preexisting);
    expect(theirsAfter).toMatchObject({
      name: "Their own name",
      email: theirs.email!.toUpperCase(),
      phone: after.get(preexisting)!.phone,
      custom_fields: { theirs: "kept" },
    });
    // A contact the run created and the customer edited is updated in place.
    const createdEdited = edited.find((id) => id !== second && id !== preexisting)!;
    const updated = await contactOf(createdEdited);
    expect(updated.action).toBe("created");
    expect(updated.name).toBe(after.get(createdEdited)!.name);
    expect(updated.name).toMatch(/ \(edited\)$/);

    const notes = await account.db.execute<{ subject_id: string; level: string; reason: string }>(sql`
      select subject_id, level, reason from drover.notes
       where run_id = ${runId}::uuid and kind = 'persons' and level = 'info' order by subject_id`);
    const noteOf = (id: string) => notes.find((n) => n.subject_id === id)?.reason;
    expect(noteOf(second)).toMatch(/not Drover's: kept its name\b.*filled its empty phone/);
    expect(noteOf(preexisting)).toMatch(/not Drover's: kept its name, email\b.*filled its empty phone/);
    expect(noteOf(createdEdited)).toBeUndefined();
  });

  it("on any kind: a matched record's empty columns and missing custom fields are filled, its values kept; a created one is overwritten", async () => {
    const tenant = "ownership-companies";
    const [theirs, ours] = await account.db.execute<{ id: string }>(sql`
      insert into app.companies (tenant_id, name, address, custom_fields)
      values (${tenant}, 'Their name', null, '{"size": "big", "blank": ""}'::jsonb),
             (${tenant}, 'Our old name', 'Old street', '{"size": "small"}'::jsonb)
      returning id::text`);
    const runId = await insertCrmRun(account.db, secrets, {
      tenantId: tenant,
      sourceAccount: "companies",
      kinds: ["organizations"],
      baseUrl: sandbox.url,
      token: TOKEN,
    });
    const slot = (sourceId: string, action: string, recordId: string) => sql`
      insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
      values (${tenant}, 'crm', 'companies', 'organizations', ${sourceId}, ${action}, 'company', ${recordId}::bigint, ${runId}::uuid)`;
    await account.db.execute(slot("o1", "matched", theirs!.id));
    await account.db.execute(slot("o2", "created", ours!.id));
    const [task] = await account.db.execute<{ id: string }>(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
      values (${runId}::uuid, 'organizations', 0, 'o', '{}'::jsonb) returning id::text`);
    const claimed = (await claimTask(account.db, Number(task!.id), "w/ownership"))!;
    const run = toRunInfo(
      (await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!,
    );
    const source = {
      name: "Source name",
      address: "1 Source St",
      customFields: { size: "tiny", blank: "x", more: 1 },
    };
    const summary = await writeBatches(
      {
        db: account.db,
        run,
        task: {
          id: claimed.id,
          kind: "organizations",
          phase: 0,
          cursor: {},
          processedOffset: 0,
          attempts: 1,
        },
        claimToken: claimed.lockedBy!,
        notesCap: 100,
        stopRequested: async () => false,
      },
      [
        { sourceId: "o1", data: source },
        { sourceId: "o2", data: source },
      ],
      independentBatch(companyKind, tenant, { get: () => undefined, has: () => false }),
      { reapply: () => true },
    );
    expect(summary).toMatchObject({ alreadyHere: 2, created: 0, failed: 0 });
    const rows = await account.db.execute<{
      id: string;
      name: string;
      address: string;
      custom_fields: unknown;
    }>(
      sql`select id::text, name, address, custom_fields from app.companies where tenant_id = ${tenant} order by id`,
    );
    expect(rows).toEqual([
      {
        id: theirs!.id,
        name: "Their name",
        address: "1 Source St",
        custom_fields: { size: "big", blank: "x", more: 1 },
      },
      { id: ours!.id, name: "Source name", address: "1 Source St", custom_fields: source.customFields },
    ]);
    const notes = await account.db.execute<{ subject_id: string; reason: string }>(
      sql`select subject_id, reason from drover.notes where run_id = ${runId}::uuid`,
    );
    expect(notes).toEqual([
      {
        subject_id: "o1",
        reason:
          "a matched record is not Drover's: kept its name, custom field size (not overwritten with the source's); filled its empty address, custom field blank, custom field more",
      },
    ]);
  });
});
