import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.js";
import { ACTIVE_CONNECTIONS_RATIO, pressureGauge } from "../src/database-pressure.js";

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

describe("database pressure", () => {
  it("reads the share of active connections by default, well under a sane threshold here", async () => {
    const gauge = pressureGauge(database.db, { query: ACTIVE_CONNECTIONS_RATIO, threshold: 0.9 });
    expect(await gauge.underPressure()).toBe(false);
    expect(gauge.lastValue).toBeGreaterThan(0);
    expect(gauge.lastValue).toBeLessThan(1);
  });

  it("follows a custom signal and its threshold", async () => {
    const high = pressureGauge(database.db, { query: "select 42 as value", threshold: 10 });
    const low = pressureGauge(database.db, { query: "select 3 as value", threshold: 10 });
    expect(await high.underPressure()).toBe(true);
    expect(await low.underPressure()).toBe(false);
  });

  it("a probe that fails reads as no pressure instead of stopping every worker", async () => {
    const broken = pressureGauge(database.db, { query: "select no_such_column as value", threshold: 0 });
    expect(await broken.underPressure()).toBe(false);
  });

  it("rejects a bad lane width at start with a message naming the variable", () => {
    expect(() => loadWorkerConfig({ DROVER_LANE_WIDTH: "many" })).toThrow(
      /DROVER_LANE_WIDTH: must be a number \(got "many"\)/,
    );
  });
});
