import { create, NoteGroupSchema, VerificationSchema } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { keepInstructions, legend, reasonsBlock, seededLine, verificationBlock } from "../src/report.js";

const group = (count: bigint, reason: string) =>
  create(NoteGroupSchema, { level: "error", kind: "persons", reason, count, sampleSubjectIds: ["7", "9"] });

describe("what the demo prints", () => {
  it("says the demo seeded the existing contacts itself, to show matching", () => {
    expect(seededLine(20, "demo")).toMatch(
      /^Seeded 20 contacts into the product for tenant "demo" before the run .*to show matching/,
    );
  });

  it("explains matched apart from already here under the table", () => {
    expect(legend()).toMatch(/matched: the product already had an equivalent record/);
    expect(legend()).toMatch(/already here: an earlier run/);
  });

  it("lists at most 8 groups of reasons and says how many groups and rows it left out, and where they are", () => {
    const groups = Array.from({ length: 11 }, (_, i) => group(BigInt(20 - i), `reason ${i}`));
    const block = reasonsBlock(groups, "run-1").split("\n");
    expect(block[0]).toBe("Reasons:");
    expect(block.slice(1, 9).every((l) => /× error persons: reason \d \(e\.g\. 7, 9\)$/.test(l))).toBe(true);
    // Groups 8, 9 and 10: 12 + 11 + 10 rows.
    expect(block[9]).toBe("  and 3 more groups (33 rows): ./node_modules/.bin/drover notes run-1");
    expect(block).toHaveLength(10);
    expect(reasonsBlock(groups.slice(0, 8), "run-1")).not.toContain("more group");
    expect(reasonsBlock([], "run-1")).toBe("");
  });

  it("prints the verification's result per kind", () => {
    const v = create(VerificationSchema, {
      ok: true,
      kinds: [{ kind: "persons", sourceCount: 4000n, ledgerCount: 3974n, failedCount: 26n, sampled: 50n }],
    });
    expect(verificationBlock(v, "run-1")).toMatch(
      /^Verified: [^\n]*\nkind +source +ledger +failed +sampled +mismatches\n[─ ]+\npersons +4000 +3974 +26 +50 +0$/,
    );
    expect(
      verificationBlock(create(VerificationSchema, { ok: false, error: "fetch failed" }), "run-1"),
    ).toMatch(/^VERIFICATION COULD NOT FINISH: fetch failed/);
  });

  it("lists the first mismatches of each kind and says how many more there are and where", () => {
    const v = create(VerificationSchema, {
      ok: false,
      kinds: [
        {
          kind: "leads",
          sourceCount: 10n,
          ledgerCount: 10n,
          sampled: 10n,
          mismatches: Array.from({ length: 8 }, (_, i) => `lead ${i}: amount differs`),
        },
      ],
    });
    const lines = verificationBlock(v, "run-1").split("\n");
    expect(lines[0]).toBe("VERIFICATION FOUND PROBLEMS:");
    expect(lines.filter((l) => l.startsWith("  leads: lead "))).toHaveLength(5);
    expect(lines.slice(-2)).toEqual([
      "  and 3 more leads mismatches",
      "Every mismatch: ./node_modules/.bin/drover status run-1",
    ]);
  });

  it("with --keep, prints the exact lines that point the CLI at the kept services, and how to start another run", () => {
    const text = keepInstructions({
      coordinatorAddress: "127.0.0.1:40001",
      adminToken: "drv_admin",
      dashboardUrl: "http://127.0.0.1:40002/",
      sandboxUrl: "http://127.0.0.1:40003",
      sandboxToken: "demo-api-token",
      source: "hubspot",
      sourceAccount: "sandbox-company",
      runId: "run-1",
    });
    expect(text.split("\n")).toEqual(
      expect.arrayContaining([
        "  export DROVER_ADDRESS=127.0.0.1:40001 DROVER_TOKEN=drv_admin",
        "  ./node_modules/.bin/drover status run-1",
        "Run page: http://127.0.0.1:40002/ (API key: drv_admin)",
        "  export DROVER_SOURCE_TOKEN=demo-api-token",
        "  ./node_modules/.bin/drover start --tenant another-tenant --source hubspot --account sandbox-company --base-url http://127.0.0.1:40003",
      ]),
    );
  });
});
