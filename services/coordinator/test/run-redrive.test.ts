import { create, RetryRunRequestSchema } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { InvalidInput } from "../src/domain-errors.js";
import { redriveFilter } from "../src/run-redrive.js";

const request = (fields: { kind?: string; reason?: string; sourceIds?: string[] }) =>
  create(RetryRunRequestSchema, { runId: "00000000-0000-0000-0000-000000000001", ...fields });

function refusal(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected a refusal");
}

describe("RetryRun's filter", () => {
  it("is absent without kind, reason or ids: the plain retry", () => {
    expect(redriveFilter(request({}))).toBeUndefined();
  });

  it("keeps what is given, ids once each", () => {
    expect(redriveFilter(request({ kind: "persons", sourceIds: ["2", "1", "2"] }))).toEqual({
      kind: "persons",
      sourceIds: ["2", "1"],
    });
    expect(redriveFilter(request({ reason: "name is missing" }))).toEqual({ reason: "name is missing" });
  });

  it("refuses a blank reason, an empty id, an id with control characters and too many ids", () => {
    for (const bad of [
      { reason: "   " },
      { sourceIds: ["1", ""] },
      { sourceIds: ["1\n2"] },
      { sourceIds: Array.from({ length: 10_001 }, (_, i) => String(i + 1)) },
    ]) {
      const err = refusal(() => redriveFilter(request(bad)));
      expect(err).toBeInstanceOf(InvalidInput);
    }
  });
});
