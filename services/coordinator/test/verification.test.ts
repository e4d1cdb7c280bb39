import { budgets, openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { toJson, VerificationSchema } from "@drover/proto";
import { createLogger } from "@drover/telemetry";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BudgetKeeper } from "../src/budget-keeper.js";
import { LeaderBudgetPacer, storedVerification, toProtoVerification } from "../src/verification.js";

let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 2 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

const logger = createLogger("test", { level: "silent" });

describe("LeaderBudgetPacer: verification's calls take their slots from the source budget", () => {
  it("leases slots from the BudgetKeeper and hands what the source said back to it", async () => {
    const keeper = new BudgetKeeper(database.db);
    const pacer = new LeaderBudgetPacer({ budgets: keeper, isLeader: () => true, logger }, "crm", "acct-a");
    const slots = await pacer.acquire("list", undefined, 3);
    expect(slots).toHaveLength(3);
    expect([...slots].sort((a, b) => a - b)).toEqual(slots);
    // The source's answers: a capacity, the daily counter, and the cost of each call.
    const headers = new Headers({ "x-ratelimit-limit": "80", "x-daily-ratelimit-token-remaining": "9000" });
    pacer.absorb(headers, 200, "list");
    pacer.absorb(headers, 200, "get");
    await new Promise((r) => setTimeout(r, 20));
    await keeper.persist(true);
    const [row] = await database.db
      .select()
      .from(budgets)
      .where(and(eq(budgets.source, "crm"), eq(budgets.sourceAccount, "acct-a")));
    expect(row).toMatchObject({ burstCapacity: 80, spent: 22 });
    // Nothing leased past the daily allowance: the keeper knows what the source said is left.
    expect(Number(row!.dailyRemaining)).toBeLessThanOrEqual(9000);
  });

  it("stops leasing once this coordinator no longer leads (the verification fails transiently)", async () => {
    const keeper = new BudgetKeeper(database.db);
    const pacer = new LeaderBudgetPacer({ budgets: keeper, isLeader: () => false, logger }, "crm", "acct-b");
    await expect(pacer.acquire("get")).rejects.toMatchObject({ class: "transient" });
  });

  it("a 429 blocks the account until its reset", async () => {
    const keeper = new BudgetKeeper(database.db);
    const pacer = new LeaderBudgetPacer({ budgets: keeper, isLeader: () => true, logger }, "crm", "acct-c");
    await pacer.acquire("get");
    pacer.absorb(new Headers({ "x-ratelimit-reset": "1" }), 429, "get");
    const started = Date.now();
    const [slot] = await pacer.acquire("get");
    expect(slot! - started).toBeGreaterThanOrEqual(900);
  });
});

describe("stored verification", () => {
  it("round-trips through the run's jsonb column, int64 counts included", () => {
    const proto = toProtoVerification({
      ok: false,
      verifiedAt: new Date("2026-01-02T03:04:05.678Z"),
      kinds: [
        {
          kind: "persons",
          sourceCount: 10,
          ledgerCount: 8,
          failedCount: 1,
          sampled: 8,
          mismatches: ["7: in the source, but neither in the ledger nor noted as failed (lost)"],
        },
      ],
    });
    // As the coordinator stores it: proto JSON with the proto's field names.
    const stored = JSON.parse(JSON.stringify(toJson(VerificationSchema, proto, { useProtoFieldName: true })));
    expect(stored.kinds[0].source_count).toBe("10");
    const back = storedVerification(stored)!;
    expect(back.ok).toBe(false);
    expect(back.kinds[0]).toMatchObject({
      kind: "persons",
      sourceCount: 10n,
      ledgerCount: 8n,
      failedCount: 1n,
      sampled: 8n,
      mismatches: ["7: in the source, but neither in the ledger nor noted as failed (lost)"],
    });
    expect(back.verifiedAt).toEqual(proto.verifiedAt);
    expect(storedVerification(null)).toBeUndefined();
    expect(storedVerification({ ok: "not a bool" })).toBeUndefined();
    expect(back.error).toBe("");
  });
});
