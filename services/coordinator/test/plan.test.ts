import { crmProvider } from "@drover/source-crm";
import { describe, expect, it } from "vitest";
import { loadCoordinatorConfig } from "../src/config.js";
import { buildPlan } from "../src/plan.js";

describe("plan", () => {
  it("keeps only the phases holding requested kinds, in the provider's order, and always closes with the catch-up pass", () => {
    expect(buildPlan(crmProvider, ["notes", "deals"])).toEqual([["deals"], ["notes"], ["catch-up"]]);
    expect(buildPlan(crmProvider, ["persons", "organizations"])).toEqual([
      ["organizations", "persons"],
      ["catch-up"],
    ]);
    expect(buildPlan(crmProvider, ["catch-up"])).toEqual([["catch-up"]]);
  });

  it("takes every phase when no kind is requested", () => {
    expect(buildPlan(crmProvider, [])).toEqual([
      ["organizations", "persons"],
      ["deals", "leads"],
      ["activities", "notes"],
      ["mail"],
      ["catch-up"],
    ]);
  });
});

describe("coordinator configuration", () => {
  it("fails at start naming each bad variable", () => {
    expect(() => loadCoordinatorConfig({ DROVER_LANE_WIDTH: "0", DROVER_GRPC_ADDRESS: "nowhere" })).toThrow(
      /DROVER_GRPC_ADDRESS: must be host:port[\s\S]*DROVER_LANE_WIDTH: must be at least 1/,
    );
  });
});
