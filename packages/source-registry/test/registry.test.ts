import { describe, expect, it } from "vitest";
import { sources } from "../src/index.js";

/**
 * Runs name their source (`runs.source`): the coordinator and the worker find its provider here by
 * that name, so a provider registered under another name than its own would be a run nobody runs.
 */
describe("the source registry", () => {
  it("holds each source under its provider's own name, crm, hubspot and pg-table among them", () => {
    expect([...sources.keys()].sort()).toEqual(expect.arrayContaining(["crm", "hubspot", "pg-table"]));
    for (const [name, provider] of sources) expect(provider.name).toBe(name);
  });
});
