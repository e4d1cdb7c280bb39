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
});
