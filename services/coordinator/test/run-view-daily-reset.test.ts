import { randomUUID } from "node:crypto";
import { budgets, openDatabase, runs } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { sources } from "@drover/source-registry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runView } from "../src/run-view.js";

/**
 * The zone a run page names for its account's daily reset comes from the run's own source, which
 * alone reads its settings (Provider.dailyResetTimeZone): the crm's `dailyReset` setting or its
 * default, and nothing for a source that states no daily rule (the crm's default once applied to
 * every run, a pg-table copy's included).
 */
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

async function zoneOf(source: string, settings: Record<string, string>): Promise<string | undefined> {
  const sourceAccount = `acct-${randomUUID().slice(0, 8)}`;
  await database.db.insert(budgets).values({
    source,
    sourceAccount,
    dailyRemaining: 0,
    dailyResetAt: new Date(Date.now() + 3_600_000),
    dailyResetBy: "rule",
  });
  const [run] = await database.db
    .insert(runs)
    .values({
      tenantId: "zones",
      source,
      sourceAccount,
      kinds: ["rows"],
      plan: [["rows"]],
      status: "succeeded",
      currentPhase: 1,
      sourceConfig: { baseUrl: "", settings },
      finishedAt: new Date(),
    })
    .returning();
  return (await runView(database.db, sources, run!)).budget?.dailyResetTimeZone;
}

describe("a run's daily reset zone", () => {
  it("is the crm's dailyReset setting, else the crm's default, and none for pg-table", async () => {
    expect(await zoneOf("crm", { dailyReset: "Europe/Berlin" })).toBe("Europe/Berlin");
    expect(await zoneOf("crm", {})).toBe("UTC");
    expect(await zoneOf("crm", { dailyReset: "probe" })).toBe("");
    expect(await zoneOf("pg-table", { dailyReset: "Europe/Berlin" })).toBe("");
  });
});
