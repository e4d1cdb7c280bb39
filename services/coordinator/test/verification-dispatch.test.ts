import { openDatabase, runs } from "@drover/db";
import { createTestDatabase } from "@drover/db/testing";
import { claimVerification, storedVerificationJson, storeVerification } from "@drover/engine";
import { type CallContext, toJson, VerificationSchema } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { storedVerification, Verifications } from "../src/verification-dispatch.js";
import { testContext } from "./test-context.js";

describe("stored verification", () => {
  it("what a worker stores on the run is what GetRun parses, int64 counts included", () => {
    const verifiedAt = new Date("2026-01-02T03:04:05.678Z");
    const stored = JSON.parse(
      JSON.stringify(
        storedVerificationJson({
          ok: false,
          verifiedAt,
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
        }),
      ),
    );
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
    expect(back.error).toBe("");
    // The same JSON the proto's own mapping writes (which leaves out a false `ok`), so nothing is lost either way.
    expect({
      ok: false,
      ...(toJson(VerificationSchema, back, { useProtoFieldName: true }) as object),
    }).toEqual(stored);
    expect(new Date(Number(back.verifiedAt!.seconds) * 1000 + back.verifiedAt!.nanos / 1e6)).toEqual(
      verifiedAt,
    );
    expect(storedVerification({ ...stored, error: "the source answered 401" })!.error).toBe(
      "the source answered 401",
    );
    expect(storedVerification(null)).toBeUndefined();
    expect(storedVerification({ ok: "not a bool" })).toBeUndefined();
  });
});

describe("VerifyRun when the broker does not take the request", () => {
  it("keeps waiting while the leader's next pass publishes it, and answers with the worker's result", async () => {
    const testDb = await createTestDatabase();
    const database = openDatabase(testDb.url, { max: 4 });
    try {
      const ctx = testContext(database.db);
      const [run] = await database.db
        .insert(runs)
        .values({
          tenantId: "t-verify",
          source: "crm",
          sourceAccount: "a",
          kinds: ["organizations"],
          plan: [["organizations"]],
          status: "succeeded",
          finishedAt: new Date(),
          sourceConfig: { baseUrl: "http://127.0.0.1:1", settings: {} },
        })
        .returning();
      // The coordinator answering the call cannot publish (a JetStream publish timing out).
      const answering = new Verifications(ctx, async () => {
        throw new Error("TimeoutError: timeout");
      });
      // The leader can; what it publishes a worker claims and verifies.
      const published: string[] = [];
      const leader = new Verifications(ctx, async (runId) => {
        published.push(runId);
        const claim = await claimVerification(database.db, runId, "worker/1");
        if (claim)
          await storeVerification(database.db, claim, {
            ok: true,
            verifiedAt: new Date(),
            kinds: [],
          });
      });
      const call: CallContext = {
        method: "drover.v1.RunService/VerifyRun",
        metadata: {},
        signal: new AbortController().signal,
        deadline: new Date(Date.now() + 20_000),
        peer: "test",
      };
      const answer = answering.onDemand(run!, call);
      let settled = false;
      void answer.finally(() => {
        settled = true;
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(settled).toBe(false);
      await leader.pass();
      expect(published).toEqual([run!.id]);
      const verification = await answer;
      expect(verification.ok).toBe(true);
    } finally {
      await database.close();
      await testDb.drop();
    }
  });
});
