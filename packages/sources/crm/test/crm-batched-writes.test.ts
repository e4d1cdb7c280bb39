import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { claimTask, toRunInfo, writeBatches } from "@drover/engine";
import type { ParentMap, SourceRow } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Company, Note, Person } from "../src/records.js";
import { companyKind, independentBatch, NOT_LINKED, noteKind, personBatch } from "../src/writers.js";

/**
 * The crm provider's independent kinds on the batched path: a window is one multi-row insert and
 * one ledger claim; each ledger row must point at the record made from its own source row, and a
 * bad row must still lose only itself.
 */
let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
const statements: string[] = [];

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, {
    max: 3,
    debug: (q) => statements.push(q.trim().toLowerCase()),
  });
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

const noParents: ParentMap = { get: () => undefined, has: () => false };

async function claimedTask(kind: string, db = database.db) {
  const [run] = await db.execute<Record<string, unknown> & { id: string }>(sql`
    insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, started_at)
    values ('t-batch', 'crm', ${`acct-${Math.random()}`}, ${sql.param([kind])}::text[], ${JSON.stringify([[kind]])}::jsonb, 'running', now())
    returning *`);
  const [task] = await db.execute<{ id: string }>(sql`
    insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
    values (${run!.id}::uuid, ${kind}, 0, ${`k-${Math.random()}`}, '{}'::jsonb) returning id`);
  const claimed = (await claimTask(db, Number(task!.id), `w/${task!.id}`))!;
  const [runRow] = await db.query.runs.findMany({ where: (r, { eq }) => eq(r.id, run!.id) });
  return {
    db,
    run: toRunInfo(runRow!),
    task: { id: claimed.id, kind, phase: 0, cursor: {}, processedOffset: 0, attempts: 1 },
    claimToken: claimed.lockedBy!,
    notesCap: 1000,
    stopRequested: async () => false,
  };
}

describe("crm batched writes", () => {
  it("a page of organizations is one multi-row insert, and every ledger row points at its own record", async () => {
    const deps = await claimedTask("organizations");
    const rows: SourceRow<Company>[] = Array.from({ length: 40 }, (_, i) => ({
      sourceId: `org-${i}`,
      data: { name: `Org ${i}`, address: `${i} Main St`, customFields: { rank: i } },
    }));
    statements.length = 0;
    const summary = await writeBatches(deps, rows, independentBatch(companyKind, "t-batch", noParents));
    expect(summary).toMatchObject({ attempted: 40, created: 40, failed: 0 });
    expect(statements.filter((s) => s.startsWith('insert into "app"."companies"'))).toHaveLength(1);
    expect(statements.filter((s) => s.startsWith("savepoint"))).toHaveLength(0);
    const linked = await database.db.execute<{
      source_id: string;
      name: string;
      address: string;
      rank: number;
    }>(sql`
      select l.source_id, c.name, c.address, (c.custom_fields->>'rank')::int as rank
        from drover.ledger l join app.companies c on c.id = l.record_id
       where l.run_id = ${deps.run.id}::uuid`);
    expect(linked).toHaveLength(40);
    for (const r of linked) {
      const i = Number(r.source_id.slice(4));
      expect(r).toMatchObject({ name: `Org ${i}`, address: `${i} Main St`, rank: i });
    }
  });

  it("a window holding a bad row falls back to savepoints: only that row fails, the rest commit", async () => {
    const deps = await claimedTask("organizations");
    const rows: SourceRow<Company>[] = Array.from({ length: 10 }, (_, i) => ({
      sourceId: `bad-org-${i}`,
      // NOT NULL on companies.name: the multi-row insert fails as a whole.
      data: { name: i === 6 ? (null as never) : `Org ${i}`, address: null, customFields: null },
    }));
    const summary = await writeBatches(deps, rows, independentBatch(companyKind, "t-batch", noParents));
    expect(summary).toMatchObject({ attempted: 10, created: 9, failed: 1 });
    const [notes] = await database.db.execute<{ n: number; subject: string }>(sql`
      select count(*)::int as n, min(subject_id) as subject from drover.notes
       where run_id = ${deps.run.id}::uuid and level = 'error'`);
    expect(notes).toEqual({ n: 1, subject: "bad-org-6" });
  });

  it("notes with no known parent are skipped in the batch and the others linked", async () => {
    const deps = await claimedTask("notes");
    const get = (kind: string, id: string | null | undefined) =>
      kind === "deals" && id === "d1" ? 77 : undefined;
    const parents: ParentMap = { get, has: (kind, id) => get(kind, id) !== undefined };
    await database.db.execute(sql`
      insert into app.deals (id, tenant_id, title) overriding system value values (77, 't-batch', 'D') on conflict do nothing`);
    const rows: SourceRow<Note>[] = [
      {
        sourceId: "n1",
        data: { content: "a", customFields: null, deal: "d1", person: null, organization: null, lead: null },
      },
      {
        sourceId: "n2",
        data: {
          content: "b",
          customFields: null,
          deal: "gone",
          person: null,
          organization: null,
          lead: null,
        },
      },
    ];
    const summary = await writeBatches(deps, rows, independentBatch(noteKind, "t-batch", parents));
    expect(summary).toMatchObject({ created: 1, skipped: 1 });
    const ledger = await database.db.execute<{
      source_id: string;
      action: string;
      reason: string | null;
    }>(sql`
      select source_id, action, reason from drover.ledger where run_id = ${deps.run.id}::uuid order by source_id`);
    expect(ledger).toEqual([
      { source_id: "n1", action: "created", reason: null },
      { source_id: "n2", action: "skipped", reason: NOT_LINKED },
    ]);
  });

  const person = (name: string, email: string | null, organization: string | null = null): Person => ({
    name,
    email,
    phone: null,
    organization,
    customFields: null,
  });

  it("persons in one batch: a known email is matched, two sharing a new email become one contact, an unresolved company is linked later", async () => {
    await database.db.execute(sql`
      insert into app.contacts (tenant_id, name, email) values ('t-persons', 'Already Here', 'known@x.io')`);
    const deps = await claimedTask("persons");
    const rows: SourceRow<Person>[] = [
      { sourceId: "p1", data: person("Known", "KNOWN@x.io") },
      { sourceId: "p2", data: person("New", "new@x.io", "org-9") },
      { sourceId: "p3", data: person("New Again", "New@X.io") },
      { sourceId: "p4", data: person("No Email", null) },
    ];
    statements.length = 0;
    const summary = await writeBatches(deps, rows, personBatch("t-persons", noParents));
    expect(summary).toMatchObject({ attempted: 4, created: 2, matched: 2, failed: 0 });
    expect(statements.filter((q) => q.startsWith("savepoint"))).toHaveLength(0);
    const ledger = await database.db.execute<{
      source_id: string;
      action: string;
      email: string | null;
      pending_refs: Record<string, string> | null;
    }>(sql`
      select l.source_id, l.action, c.email, l.pending_refs from drover.ledger l join app.contacts c on c.id = l.record_id
       where l.run_id = ${deps.run.id}::uuid order by l.source_id`);
    expect(ledger).toEqual([
      { source_id: "p1", action: "matched", email: "known@x.io", pending_refs: null },
      { source_id: "p2", action: "created", email: "new@x.io", pending_refs: { organizations: "org-9" } },
      { source_id: "p3", action: "matched", email: "new@x.io", pending_refs: null },
      { source_id: "p4", action: "created", email: null, pending_refs: null },
    ]);
  });

  it("two workers writing persons with the same emails at once create one contact per email", async () => {
    const a = openDatabase(testDb.url, { max: 2 });
    const b = openDatabase(testDb.url, { max: 2 });
    try {
      for (let round = 0; round < 5; round++) {
        const emails = Array.from({ length: 30 }, (_, i) => `race${round}-${i}@x.io`);
        const rowsFor = (prefix: string, order: string[]): SourceRow<Person>[] =>
          order.map((email, i) => ({ sourceId: `${prefix}${i}`, data: person(`P ${email}`, email) }));
        const [da, dbb] = [await claimedTask("persons", a.db), await claimedTask("persons", b.db)];
        const [sa, sb] = await Promise.all([
          writeBatches(da, rowsFor("a", emails), personBatch("t-race", noParents)),
          writeBatches(dbb, rowsFor("b", [...emails].reverse()), personBatch("t-race", noParents)),
        ]);
        expect(sa.created + sb.created).toBe(30);
        expect(sa.matched + sb.matched).toBe(30);
        const [dups] = await database.db.execute<{ n: number }>(sql`
          select count(*)::int as n from (
            select lower(email) from app.contacts where tenant_id = 't-race' and email like ${`race${round}-%`}
             group by lower(email) having count(*) > 1) d`);
        expect(dups!.n).toBe(0);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});
