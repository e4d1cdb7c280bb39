import type { RunInfo } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { dailyResetTimeZone, hubspotProvider } from "../src/index.js";

const good = { baseUrl: "https://api.hubapi.com", apiToken: "pat-na1-abc", settings: {} };

function runWith(settings: Record<string, string>): RunInfo {
  return {
    id: "r",
    tenantId: "t",
    source: "hubspot",
    sourceAccount: "a",
    kinds: [],
    plan: hubspotProvider.phases.map((p) => [...p]),
    sourceConfig: { baseUrl: good.baseUrl, settings },
    startedAt: null,
  };
}

describe("the hubspot source's configuration", () => {
  it("takes a base URL, a token and no settings, or every setting it knows", () => {
    expect(hubspotProvider.validateConfig(good)).toBeUndefined();
    expect(
      hubspotProvider.validateConfig({
        ...good,
        settings: {
          dailyResetTimeZone: "America/New_York",
          daySeconds: "60",
          pagesPerTask: "5",
          windowSize: "50",
        },
      }),
    ).toBeUndefined();
  });

  it("refuses a bad config with a sentence saying what to fix", () => {
    const refusals: [Partial<typeof good>, RegExp][] = [
      [
        { baseUrl: "api.hubapi.com" },
        /base_url "api.hubapi.com" is not a URL; give https:\/\/api.hubapi.com/,
      ],
      [{ baseUrl: "ftp://api.hubapi.com" }, /base_url must be http\(s\)/],
      [{ baseUrl: "https://user:pw@api.hubapi.com" }, /must not carry credentials; pass api_token instead/],
      [{ apiToken: "  " }, /api_token is required: a HubSpot private app's access token/],
      [
        { settings: { dailyResetTimeZone: "Mars/Olympus" } as never },
        /dailyResetTimeZone must be an IANA time zone \(e\.g\. America\/New_York.*got "Mars\/Olympus"/,
      ],
      [
        { settings: { pageSize: "500" } as never },
        /unknown hubspot setting "pageSize"; known: dailyResetTimeZone, daySeconds, pagesPerTask, windowSize/,
      ],
      [{ settings: { windowSize: "0" } as never }, /windowSize must be an integer from 1 to 1000, got "0"/],
      [
        { settings: { daySeconds: "1.5" } as never },
        /daySeconds must be an integer from 1 to 86400, got "1.5"/,
      ],
    ];
    for (const [change, sentence] of refusals)
      expect(hubspotProvider.validateConfig({ ...good, ...change }), JSON.stringify(change)).toMatch(
        sentence,
      );
  });

  it("says the account's daily reset zone only when the run names one", () => {
    expect(dailyResetTimeZone(runWith({ dailyResetTimeZone: "Europe/Lisbon" }))).toBe("Europe/Lisbon");
    expect(dailyResetTimeZone(runWith({}))).toBeUndefined();
  });

  it("reads the records side by side, their links made at the barrier, then the engagements, and closes with the catch-up", () => {
    expect(hubspotProvider.phases).toEqual([
      ["companies", "contacts", "deals"],
      ["notes", "emails", "calls", "tasks", "meetings"],
      ["catch-up"],
    ]);
    expect(hubspotProvider.deferredLinks?.map((l) => `${l.kind}.${l.column} -> ${l.ref}`)).toEqual([
      "contacts.company_id -> companies",
      "deals.contact_id -> contacts",
      "deals.company_id -> companies",
    ]);
    expect(hubspotProvider.closingKinds).toEqual(["catch-up"]);
  });
});
