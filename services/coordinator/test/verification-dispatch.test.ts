import { storedVerificationJson } from "@drover/engine";
import { toJson, VerificationSchema } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { storedVerification } from "../src/verification-dispatch.js";

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
