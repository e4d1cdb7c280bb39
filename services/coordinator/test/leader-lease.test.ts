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

describe("a silent leader", () => {
  it("loses the lease to another coordinator once it has said nothing for the leader timeout, and knows it", async () => {
    // A frozen or cut-off leader: it took the lease, then stops refreshing (its connection stays open).
    const silent = leaderLease(testDb.url, { holder: "c1", address: "10.0.0.1:50051" }, { timeoutMs: 1_500 });
    const next = leaderLease(testDb.url, { holder: "c2", address: "10.0.0.2:50051" }, { timeoutMs: 1_500 });
    try {
      expect(await silent.refresh()).toBe(true);
      expect(await next.refresh()).toBe(false);
      const deadline = Date.now() + 30_000;
      while (!(await next.refresh())) {
        if (Date.now() > deadline) throw new Error("the silent leader's lock was never freed");
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(await leaderAddress(database.db)).toBe("10.0.0.2:50051");
      // Its lease lapsed on its own side too, before it asks again; asking again says it is gone.
      expect(silent.held).toBe(false);
      expect(await silent.refresh()).toBe(false);
    } finally {
      await silent.release();
      await next.release();
    }
  });
});
