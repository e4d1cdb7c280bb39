import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimLedgerSlot, heldSlots, resolveParents } from "../src/index.js";

let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
const runId = "00000000-0000-4000-8000-000000000001";
const scope = { tenantId: "t1", source: "crm", sourceAccount: "acme" };

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 6 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

describe("ledger", () => {
  it("two writers claiming one slot at once: exactly one owns it", async () => {
    const b = openDatabase(testDb.url, { max: 2 });
    try {
      for (let i = 0; i < 10; i++) {
        const claim = {
          ...scope,
          kind: "deals",
          sourceId: `race-${i}`,
          action: "created" as const,
          recordId: i,
          runId,
        };
        const [x, y] = await Promise.all([
          database.db.transaction((tx) => claimLedgerSlot(tx, { ...claim, recordType: "a" })),
          b.db.transaction((tx) => claimLedgerSlot(tx, { ...claim, recordType: "b" })),
        ]);
        expect([x, y].filter(Boolean)).toHaveLength(1);
      }
    } finally {
      await b.close();
    }
  });

  it("a skipped slot is a placeholder any later claim takes over; a created one is not", async () => {
    const base = { ...scope, kind: "notes", sourceId: "n1", runId };
    expect(
      await claimLedgerSlot(database.db, { ...base, action: "skipped", reason: "not linked to any record" }),
    ).toBe(true);
    expect(
      await claimLedgerSlot(database.db, { ...base, action: "created", recordType: "note", recordId: 7 }),
    ).toBe(true);
    expect(await claimLedgerSlot(database.db, { ...base, action: "skipped", reason: "late" })).toBe(false);
    expect(
      await claimLedgerSlot(database.db, { ...base, action: "matched", recordType: "note", recordId: 8 }),
    ).toBe(false);
    const [row] = await database.db.execute<{ action: string; record_id: string }>(
      sql`select action, record_id from drover.ledger where kind = 'notes' and source_id = 'n1'`,
    );
    expect(row).toEqual({ action: "created", record_id: "7" });
  });

  it("resolves parents of several kinds in one query, and only created or matched ones", async () => {
    await claimLedgerSlot(database.db, {
      ...scope,
      kind: "persons",
      sourceId: "p1",
      action: "created",
      recordType: "contact",
      recordId: 11,
      runId,
    });
    await claimLedgerSlot(database.db, {
      ...scope,
      kind: "persons",
      sourceId: "p2",
      action: "matched",
      recordType: "contact",
      recordId: 12,
      runId,
    });
    await claimLedgerSlot(database.db, {
      ...scope,
      kind: "organizations",
      sourceId: "o1",
      action: "created",
      recordType: "company",
      recordId: 21,
      runId,
    });
    await claimLedgerSlot(database.db, {
      ...scope,
      kind: "organizations",
      sourceId: "o2",
      action: "skipped",
      reason: "x",
      runId,
    });
    await claimLedgerSlot(database.db, {
      ...scope,
      tenantId: "other",
      kind: "persons",
      sourceId: "p3",
      action: "created",
      recordType: "contact",
      recordId: 99,
      runId,
    });
    const parents = await resolveParents(database.db, scope, {
      persons: ["p1", "p2", "p3", "p1"],
      organizations: ["o1", "o2"],
    });
    expect(parents.get("persons", "p1")).toBe(11);
    expect(parents.get("persons", "p2")).toBe(12);
    expect(parents.get("persons", "p3")).toBeUndefined(); // another tenant's ledger
    expect(parents.get("organizations", "o1")).toBe(21);
    expect(parents.get("organizations", "o2")).toBeUndefined(); // skipped: no record
    expect(parents.get("persons", null)).toBeUndefined();
    expect(parents.size).toBe(3);
  });

  it("held slots: a window's created and matched rows of one kind, in one query; skipped rows and other tenants are not held", async () => {
    const held = { ...scope, tenantId: "t-held", runId };
    await claimLedgerSlot(database.db, {
      ...held,
      kind: "persons",
      sourceId: "h1",
      action: "created",
      recordType: "contact",
      recordId: 5,
    });
    await claimLedgerSlot(database.db, {
      ...held,
      kind: "persons",
      sourceId: "h2",
      action: "matched",
      recordType: "contact",
      recordId: 5,
    });
    await claimLedgerSlot(database.db, {
      ...held,
      kind: "persons",
      sourceId: "h3",
      action: "skipped",
      reason: "x",
    });
    await claimLedgerSlot(database.db, {
      ...held,
      kind: "deals",
      sourceId: "h4",
      action: "created",
      recordType: "deal",
      recordId: 6,
    });
    await claimLedgerSlot(database.db, {
      ...held,
      tenantId: "t-other",
      kind: "persons",
      sourceId: "h5",
      action: "created",
      recordType: "contact",
      recordId: 7,
    });
    const slots = await heldSlots(database.db, { ...scope, tenantId: "t-held" }, "persons", [
      "h1",
      "h2",
      "h3",
      "h4",
      "h5",
      "h1",
    ]);
    expect(Object.fromEntries(slots)).toEqual({
      h1: { action: "created", recordType: "contact", recordId: 5 },
      h2: { action: "matched", recordType: "contact", recordId: 5 },
    });
    expect((await heldSlots(database.db, scope, "persons", [])).size).toBe(0);
  });

  it("held slots and parents cost one ledger row read per id asked, however large the tenant's ledger and whatever the planner knows of it", async () => {
    const big = { ...scope, tenantId: "t-big" };
    // 20,000 slots of one tenant, never analyzed (as after a bulk import with autovacuum behind).
    await database.db.execute(sql`
      insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
      select ${big.tenantId}, ${big.source}, ${big.sourceAccount}, k.kind, g::text, 'created', 'r', g, ${runId}::uuid
        from generate_series(1, 10000) g, (values ('organizations'), ('persons')) as k(kind)`);
    const asked = ["17", "4242", "9999", "no-such-row"];
    // Ledger rows this transaction read: by sequential scans, and index entries by any index.
    const ledgerRowsRead = async (tx: Parameters<Parameters<typeof database.db.transaction>[0]>[0]) => {
      const [r] = await tx.execute<{ n: string }>(sql`
        select (pg_stat_get_xact_tuples_returned('drover.ledger'::regclass)
              + (select coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)
                   from pg_index where indrelid = 'drover.ledger'::regclass))::text as n`);
      return Number(r!.n);
    };
    await database.db.transaction(async (tx) => {
      const before = await ledgerRowsRead(tx);
      const held = await heldSlots(tx, big, "persons", asked);
      expect([...held.keys()].sort()).toEqual(["17", "4242", "9999"]);
      expect((await ledgerRowsRead(tx)) - before).toBeLessThanOrEqual(asked.length);
    });
    await database.db.transaction(async (tx) => {
      const before = await ledgerRowsRead(tx);
      const parents = await resolveParents(tx, big, { organizations: asked, persons: ["5"] });
      expect(parents.get("organizations", "4242")).toBe(4242);
      expect(parents.get("persons", "5")).toBe(5);
      expect(parents.size).toBe(4);
      expect((await ledgerRowsRead(tx)) - before).toBeLessThanOrEqual(asked.length + 1);
    });
  });
});
