import { RUN_STATUSES as STORED } from "@drover/db/statuses";
import { describe, expect, it } from "vitest";
import {
  fromProtoRunStatus,
  RUN_STATUSES,
  RunStatus,
  runStatusFromName,
  runStatusName,
  toProtoRunStatus,
} from "../src/index.js";

describe("the run status vocabulary on the wire", () => {
  it("maps every stored status to its own RunStatus and back, and nothing else", () => {
    expect(RUN_STATUSES).toBe(STORED);
    const wire = RUN_STATUSES.map(toProtoRunStatus);
    expect(new Set(wire).size).toBe(RUN_STATUSES.length);
    expect(wire).not.toContain(RunStatus.UNSPECIFIED);
    for (const name of RUN_STATUSES) {
      expect(fromProtoRunStatus(toProtoRunStatus(name))).toBe(name);
      expect(runStatusFromName(name)).toBe(toProtoRunStatus(name));
      expect(runStatusName(toProtoRunStatus(name))).toBe(name);
    }
    // Every enum member but UNSPECIFIED is a word of the vocabulary.
    const members = Object.values(RunStatus).filter((v): v is RunStatus => typeof v === "number");
    expect(members.filter((m) => m !== RunStatus.UNSPECIFIED).sort()).toEqual([...wire].sort());
    expect(runStatusName(RunStatus.UNSPECIFIED)).toBe("unknown");
    expect(fromProtoRunStatus(RunStatus.UNSPECIFIED)).toBeUndefined();
    expect(runStatusFromName("toString")).toBeUndefined();
    expect(runStatusFromName("RUNNING")).toBeUndefined();
  });

  it("is frozen: no layer can add a status of its own at run time", () => {
    expect(Object.isFrozen(RUN_STATUSES)).toBe(true);
  });
});
