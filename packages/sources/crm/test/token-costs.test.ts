import { ENDPOINT_COSTS as SANDBOX_COSTS, startSandbox } from "@drover/crm-sandbox";
import { type BudgetPacer, SourceClient } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { pipedriveAdapter } from "../src/client.js";
import { ENDPOINT_COSTS, tokenCost } from "../src/token-costs.js";

/**
 * Pipedrive's published `x-token-cost` of every read the crm provider makes, copied from its
 * OpenAPI files (api-evangelist/pipedrive openapi/_original/pipedrive-v{1,2}-openapi.yml, snapshot
 * 2026-08-03; /work/shared/research/source-facts-2026-12.md §1.2). Both the provider's table and
 * the sandbox's must say the same.
 */
const PUBLISHED: Record<string, number> = {
  "/api/v2/deals": 10,
  "/api/v2/persons": 10,
  "/api/v2/organizations": 10,
  "/api/v2/activities": 10,
  "/api/v2/deals/archived": 20,
  "/api/v2/deals/{id}": 1,
  "/api/v2/persons/{id}": 1,
  "/api/v2/organizations/{id}": 1,
  "/api/v2/activities/{id}": 1,
  "/v1/leads": 20,
  "/v1/leads/archived": 40,
  "/v1/leads/{id}": 2,
  "/v1/notes": 20,
  "/v1/notes/{id}": 2,
  "/v1/deals/{id}/mailMessages": 20,
  "/v1/mailbox/mailMessages/{id}": 2,
  "/v1/organizationFields": 20,
};

describe("token costs per endpoint", () => {
  it("are Pipedrive's published costs in both the crm adapter's table and the sandbox's", () => {
    expect(ENDPOINT_COSTS).toEqual(PUBLISHED);
    for (const [endpoint, tokens] of Object.entries(PUBLISHED)) expect(SANDBOX_COSTS[endpoint]).toBe(tokens);
  });

  it("price a request by its path: a v2 list 10, a v2 row 1, the archived deals 20, a v1 list 20, a message 2", () => {
    expect(tokenCost("list", "/api/v2/deals")).toBe(10);
    expect(tokenCost("list", "/api/v2/deals/archived")).toBe(20);
    expect(tokenCost("get", "/api/v2/persons/42")).toBe(1);
    expect(tokenCost("list", "/v1/leads")).toBe(20);
    expect(tokenCost("list", "/v1/leads/archived")).toBe(40);
    expect(tokenCost("list", "/v1/deals/17/mailMessages")).toBe(20);
    expect(tokenCost("get", "/v1/mailbox/mailMessages/99")).toBe(2);
    expect(tokenCost("get", "/v1/leads/0c4e1b1a-7d2f-4b8e-9a1d-3c5e6f7a8b9c")).toBe(2);
  });

  it("are what the sandbox charges for each request the adapter paces", async () => {
    const sandbox = await startSandbox({
      port: 0,
      deals: 5,
      leads: 5,
      notes: 5,
      persons: 5,
      mailPerDealMax: 3,
    });
    const costs: number[] = [];
    const pacer: BudgetPacer = {
      graceMs: Number.POSITIVE_INFINITY,
      acquire: async (cost, _signal, count = 1) => {
        costs.push(cost);
        return Array.from({ length: count }, () => Date.now());
      },
      absorb: () => {},
    };
    const client = new SourceClient({
      baseUrl: sandbox.url,
      apiToken: "t",
      adapter: pipedriveAdapter(),
      pacer,
    });
    try {
      const requests: [string, "list" | "get"][] = [
        ["/api/v2/deals", "list"],
        ["/api/v2/deals/archived", "list"],
        ["/api/v2/persons/1", "get"],
        ["/v1/leads", "list"],
        ["/v1/leads/archived", "list"],
        ["/v1/notes", "list"],
        ["/v1/deals/1/mailMessages", "list"],
      ];
      for (const [path, type] of requests) {
        const before = sandbox.stats().tokensSpent;
        await client.getJson(path, {}, type);
        expect(sandbox.stats().tokensSpent - before, path).toBe(costs.at(-1));
      }
      expect(costs).toEqual([10, 20, 1, 20, 40, 20, 20]);
    } finally {
      await sandbox.close();
    }
  });
});
