import { openDatabase } from "@drover/db";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readRunFact, settleRunFact } from "../src/index.js";
import { type Harness, insertRun, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("run facts", () => {
  it("two tasks settling one fact at once both get the first writer's value, every time", async () => {
    const a = openDatabase(h.testDb.url, { max: 2 });
    const b = openDatabase(h.testDb.url, { max: 2 });
    try {
      for (let i = 0; i < 20; i++) {
        const run = await insertRun(h.db);
        expect(await readRunFact(h.db, run.id, "crm.mail.bodies")).toBeUndefined();
        const [x, y] = await Promise.all([
          settleRunFact(a.db, run.id, "crm.mail.bodies", "list"),
          settleRunFact(b.db, run.id, "crm.mail.bodies", "fetch"),
        ]);
        expect(x).toBe(y);
        expect(await readRunFact(h.db, run.id, "crm.mail.bodies")).toBe(x);
        // Settled: a later, different finding does not change it.
        expect(await settleRunFact(h.db, run.id, "crm.mail.bodies", x === "list" ? "fetch" : "list")).toBe(x);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});
