import { describe, expect, it } from "vitest";
import { drainKinds, verifyCrmRun } from "./crm-drain.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * Verification takes the source's rows from what the import listed, and asks the source only for a
 * cheap count where it has one: Pipedrive's v1 lists are probed where the import's listing ended.
 * A lead added at the source after the import listed its pages is not in that listing: the probe
 * must see that the source holds more, and the leads are then listed again to name it.
 */
const account = crmTestAccount("verify-listing");

describe("verifying from the import's listing", { timeout: 120_000 }, () => {
  it("costs a probe per v1 list and the sample, and still finds a lead the source has and the import never listed", async () => {
    const s = await account.sandbox({
      seed: 31,
      organizations: 10,
      persons: 10,
      deals: 0,
      leads: 120,
      activities: 0,
      notes: 0,
      malformedRate: 0,
      transientErrorRate: 0,
      changeAdds: 2,
      changeEdits: 0,
    });
    const runId = await insertCrmRun(account.db, account.secrets, {
      tenantId: "verify-listing",
      sourceAccount: "verify-listing",
      kinds: ["leads"],
      baseUrl: s.url,
      token: account.token,
      settings: { pageSize: "50", stripes: "2" },
    });
    const tasks = await drainKinds(account.db, account.secrets, runId, [["leads"]]);
    expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);

    s.resetStats();
    const clean = await verifyCrmRun(account.db, runId, account.token, 50);
    expect(clean.kinds.map((k) => [k.kind, k.mismatches])).toEqual([["leads", []]]);
    expect(clean.kinds[0]!.sourceCount).toBe(s.truth(["leads"]).kinds.leads.count);
    // Nothing walked: one probe per leads list (live and archived), and the sample by id (50 / 5).
    expect(s.stats().byCallType).toEqual({ list: 2, get: 10 });

    // Two leads appear at the source after the import (and its catch-up) listed every page.
    await fetch(`${s.url}/__sandbox/changes`, { method: "POST" });
    const added = s.truth(["leads"]).kinds.leads.added;
    expect(added.length).toBe(2);
    const after = await verifyCrmRun(account.db, runId, account.token, 50);
    const leads = after.kinds[0]!;
    expect(after.ok).toBe(false);
    expect(leads.sourceCount).toBe(s.truth(["leads"]).kinds.leads.count);
    expect(leads.mismatches).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^the source counts \d+ leads now, the import listed \d+: listed again/),
        ...added.map((id) => `${id}: in the source, but neither in the ledger nor noted as failed (lost)`),
      ]),
    );
  });

  it("lists no deal's mail where the deal lists say a deal has none, even without a mail listing to go by", async () => {
    // No deal has mail: the import seeds no mail task, so verification has no mail listing of the
    // import's and must ask the source. The deal lists answer with each deal's message count.
    const s = await account.sandbox({
      seed: 32,
      organizations: 10,
      persons: 10,
      deals: 120,
      leads: 0,
      activities: 0,
      notes: 0,
      mailPerDealMax: 0,
      heavyMailDealRate: 0,
      malformedRate: 0,
      transientErrorRate: 0,
    });
    const runId = await insertCrmRun(account.db, account.secrets, {
      tenantId: "verify-no-mail",
      sourceAccount: "verify-no-mail",
      kinds: ["deals", "mail"],
      baseUrl: s.url,
      token: account.token,
      settings: { pageSize: "50", stripes: "2" },
    });
    const tasks = await drainKinds(account.db, account.secrets, runId, [["deals"], ["mail"]]);
    expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
    expect(tasks.filter((t) => t.kind === "mail")).toEqual([]);

    s.resetStats();
    const verified = await verifyCrmRun(account.db, runId, account.token, 50);
    expect(verified.kinds.find((k) => k.kind === "mail")).toMatchObject({ sourceCount: 0, mismatches: [] });
    const endpoints = s.stats().byEndpoint;
    // The deal lists were walked once, with the counts; not one deal's mail was listed (20 tokens each).
    expect(endpoints["/v1/deals/{id}/mailMessages"]).toBeUndefined();
    expect(endpoints["/api/v2/deals"]?.requests).toBeGreaterThan(0);
  });
});
