import { leaderAddress, openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { leaderLease } from "../src/leader-lease.js";

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

describe("the leader's address", () => {
  it("is what leaderAddress (the lookup workers use too) reads once a coordinator takes the lease, and moves with it", async () => {
    expect(await leaderAddress(database.db)).toBeUndefined();
    const first = leaderLease(testDb.url, { holder: "c1", address: "10.0.0.1:50051" });
    const second = leaderLease(testDb.url, { holder: "c2", address: "10.0.0.2:50051" });
    try {
      expect(await first.refresh()).toBe(true);
      expect(await second.refresh()).toBe(false);
      expect(await leaderAddress(database.db)).toBe("10.0.0.1:50051");
      await first.release();
      expect(await second.refresh()).toBe(true);
      expect(await leaderAddress(database.db)).toBe("10.0.0.2:50051");
    } finally {
      await first.release();
      await second.release();
    }
  });
});
