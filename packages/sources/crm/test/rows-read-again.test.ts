import { type Sandbox, startSandbox } from "@drover/crm-sandbox";
import { SourceClient } from "@drover/provider-sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pipedriveAdapter } from "../src/client.js";
import { readRowsAgain } from "../src/rows-by-ids.js";
import { COMPARED } from "../src/verifier.js";

/**
 * Rows read again by id (re-drive) go a hundred a request through the kind's v2 lists' `ids`
 * filter wherever that costs fewer tokens than a GET each, the archived deals through their own
 * list; a few rows go one GET each. Counted by the sandbox's own stats.
 */
let sandbox: Sandbox;
let client: SourceClient;
const DEALS = 200;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, deals: DEALS, archivedRate: 0.3, mailPerDealMax: 0 });
  client = new SourceClient({ baseUrl: sandbox.url, apiToken: "t", adapter: pipedriveAdapter() });
});
afterAll(() => sandbox.close());

const ids = (n: number) => Array.from({ length: n }, (_, i) => String(i + 1));

describe("rows read again by id", () => {
  it("go a hundred a request through the deal list and then the archived deals' list, every row found", async () => {
    sandbox.resetStats();
    const { raws, gone } = await readRowsAgain(client, "deals", COMPARED.deals!, ids(DEALS));
    expect(raws.size).toBe(DEALS);
    expect(gone.size).toBe(0);
    const stats = sandbox.stats();
    expect(stats.byEndpoint["/api/v2/deals"]?.requests).toBe(2);
    expect(stats.byEndpoint["/api/v2/deals/archived"]?.requests).toBe(1);
    expect(stats.byEndpoint["/api/v2/deals/{id}"]).toBeUndefined();
    expect(stats.tokensSpent).toBe(2 * 10 + 20);
  });

  it("go one GET each where that costs fewer tokens than a list", async () => {
    sandbox.resetStats();
    const { raws } = await readRowsAgain(client, "deals", COMPARED.deals!, ids(5));
    expect(raws.size).toBe(5);
    const stats = sandbox.stats();
    expect(stats.byEndpoint["/api/v2/deals/{id}"]?.requests).toBe(5);
    expect(stats.byEndpoint["/api/v2/deals"]).toBeUndefined();
    expect(stats.tokensSpent).toBe(5);
  });

  it("say which rows the source no longer has", async () => {
    const { raws, gone } = await readRowsAgain(client, "deals", COMPARED.deals!, ["3", String(DEALS + 50)]);
    expect([...raws.keys()]).toEqual(["3"]);
    expect([...gone]).toEqual([String(DEALS + 50)]);
  });
});
