import { PermanentError } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { pgTableRedrive } from "../src/redrive.js";

describe("pg-table re-drive seeds", () => {
  it("pg-table: one task per slot, its keys in key order, at any checkpoint of the noting task", () => {
    const slot = { from: 0, to: 3_600_000 };
    const seeds = pgTableRedrive.seeds(
      "rows",
      [
        { sourceId: "01B", listedIn: { ...slot, lastId: "01Z" } },
        { sourceId: "01A", listedIn: { ...slot } },
        { sourceId: "02A", listedIn: { from: 3_600_000, to: 7_200_000, redrive: ["02A"], lastId: "02" } },
      ],
      "k",
    );
    expect(seeds.map((s) => s.cursor)).toEqual([
      { ...slot, redrive: ["01A", "01B"] },
      { from: 3_600_000, to: 7_200_000, redrive: ["02A"] },
    ]);
    expect(pgTableRedrive.reads("rows")).toBe("by-listing");
    expect(() => pgTableRedrive.seeds("rows", [{ sourceId: "x", listedIn: {} }], "k")).toThrow(
      PermanentError,
    );
  });
});
