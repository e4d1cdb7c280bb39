import { PermanentError } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { crmRedrive } from "../src/redrive.js";

describe("crm re-drive seeds", () => {
  it("crm: mail is read by listing, every other kind by id", () => {
    expect(crmRedrive.reads("mail")).toBe("by-listing");
    expect(crmRedrive.reads("persons")).toBe("by-id");
    expect(crmRedrive.refuses("mail")).toBeUndefined();
    expect(crmRedrive.refuses("widgets")).toContain("no rows of kind");
  });

  it("crm mail: one task per noting task's deals, whatever kind of mail task noted the rows", () => {
    const walk = { deals: ["1", "2"], index: 1, bodies: "fetch" };
    const catchUp = { deals: ["9"], index: 0, since: "2026-01-01T00:00:00Z" };
    const redrive = { redrive: ["70"], deals: ["1", "2"] };
    const seeds = crmRedrive.seeds(
      "mail",
      [
        { sourceId: "10", listedIn: walk },
        { sourceId: "90", listedIn: catchUp },
        { sourceId: "70", listedIn: redrive },
      ],
      "k",
    );
    expect(seeds.map((s) => s.cursor)).toEqual([
      { redrive: ["10", "70"], deals: ["1", "2"] },
      { redrive: ["90"], deals: ["9"] },
    ]);
    expect(new Set(seeds.map((s) => s.seedKey)).size).toBe(2);
    expect(() => crmRedrive.seeds("mail", [{ sourceId: "5", listedIn: { list: 0 } }], "k")).toThrow(
      PermanentError,
    );
  });
});
