import type { EstimateContext, RunInfo, TaskTally } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { estimateHubSpotWork, hubspotProvider, propertiesFact } from "../src/index.js";

const run: RunInfo = {
  id: "r",
  tenantId: "t",
  source: "hubspot",
  sourceAccount: "a",
  kinds: [],
  plan: [["companies"], ["contacts"], ["catch-up"]],
  sourceConfig: { baseUrl: "https://api.hubapi.com", settings: {} },
  startedAt: null,
};

function contextWith(tasks: TaskTally[], facts: Record<string, unknown> = {}): EstimateContext {
  return {
    run,
    tasks,
    db: undefined as never,
    ledger: undefined as never,
    runFact: async (key) => facts[key],
  };
}

describe("the hubspot work estimate", () => {
  it("is a floor: each chain still walking (live and archived apart) needs its page, a type not begun its properties and both first pages", async () => {
    const estimate = await estimateHubSpotWork(
      contextWith(
        [
          { kind: "companies", status: "running", cursor: { archived: false, after: "200", page: 2 }, n: 1 },
          { kind: "companies", status: "pending", cursor: { archived: true, after: null, page: 0 }, n: 1 },
          { kind: "companies", status: "succeeded", cursor: { archived: false, after: null, page: 0 }, n: 2 },
        ],
        { [propertiesFact("companies")]: { batches: [["name"], ["domain"]], custom: [] } },
      ),
    );
    expect(estimate.kinds).toEqual([
      // Two pages at two property batches each, no associations read from a company's side.
      { kind: "companies", requests: 4, tokens: 4, atLeast: true },
      // Not begun: its properties, then two pages of one batch and one association read each.
      { kind: "contacts", requests: 5, tokens: 5, atLeast: true },
    ]);
  });

  it("is the provider's estimate", () => {
    expect(hubspotProvider.estimateWork).toBe(estimateHubSpotWork);
  });
});
