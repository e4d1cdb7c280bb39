import { describe, expect, it } from "vitest";
import { OBJECT_TYPES } from "../src/index.js";
import { get, type Json, sandbox, walk } from "./helpers.js";

const ids = (rows: Json[]) => rows.map((r) => r.id as string);

describe("GET /crm/v3/objects/{type}", () => {
  it("walks every live record of every type exactly once, in id order, by paging.next.after", async () => {
    const s = await sandbox({ seed: 1, companies: 230, contacts: 250, deals: 120, engagements: 101 });
    for (const type of OBJECT_TYPES) {
      const rows = await walk(s, `/crm/v3/objects/${type}?limit=100`);
      const expected = s.ids(type).live;
      expect(expected.length, type).toBeGreaterThan(50);
      expect(ids(rows), type).toEqual(expected);
      expect(new Set(ids(rows)).size, type).toBe(rows.length);
    }
  });

  it("starts a page after the id its cursor names, and ends with no paging at the last record", async () => {
    const s = await sandbox({ seed: 2, contacts: 30, archivedRate: 0 });
    const first = await get(s, "/crm/v3/objects/contacts?limit=10");
    const next = (first.body.paging as { next: { after: string; link: string } }).next;
    expect(next.after).toBe((first.body.results as Json[])[9]?.id);
    expect(next.link).toContain(`after=${next.after}`);
    const second = await get(s, `/crm/v3/objects/contacts?limit=10&after=${next.after}`);
    expect(Number((second.body.results as Json[])[0]?.id)).toBe(Number(next.after) + 1);
    const last = await get(s, "/crm/v3/objects/contacts?limit=100");
    expect((last.body.results as Json[]).length).toBe(30);
    expect(last.body).not.toHaveProperty("paging");
  });

  it("returns only the properties named, plus hs_object_id and the two dates; defaults when none is named", async () => {
    const s = await sandbox({ seed: 3, contacts: 20, deals: 20, customProperties: 3 });
    const named = await get(
      s,
      "/crm/v3/objects/contacts?limit=5&properties=email&properties=drover_custom_02,nosuch",
    );
    for (const row of named.body.results as Json[])
      expect(Object.keys(row.properties as Json).sort()).toEqual(
        ["createdate", "drover_custom_02", "email", "hs_object_id", "lastmodifieddate"].sort(),
      );
    const defaults = await get(s, "/crm/v3/objects/deals?limit=5");
    for (const row of defaults.body.results as Json[])
      expect(Object.keys(row.properties as Json).sort()).toEqual(
        [
          "amount",
          "closedate",
          "createdate",
          "dealname",
          "dealstage",
          "hs_lastmodifieddate",
          "hs_object_id",
          "pipeline",
        ].sort(),
      );
  });

  it("lists archived records only with archived=true, each with archivedAt", async () => {
    const s = await sandbox({ seed: 4, deals: 300, archivedRate: 0.2 });
    const archived = await walk(s, "/crm/v3/objects/deals?limit=100&archived=true");
    expect(ids(archived)).toEqual(s.ids("deals").archived);
    expect(archived.length).toBeGreaterThan(30);
    for (const row of archived) {
      expect(row.archived).toBe(true);
      expect(typeof row.archivedAt).toBe("string");
    }
    const live = await walk(s, "/crm/v3/objects/deals?limit=100");
    expect(live.every((r) => r.archived === false && !("archivedAt" in r))).toBe(true);
  });

  it("refuses a limit above 100 with a 400 in HubSpot's error shape", async () => {
    const s = await sandbox({ seed: 5, contacts: 5 });
    const r = await get(s, "/crm/v3/objects/contacts?limit=101");
    expect(r.status).toBe(400);
    expect(Object.keys(r.body).sort()).toEqual(["category", "correlationId", "message", "status"]);
  });

  it("refuses a request without a bearer token with a 401 INVALID_AUTHENTICATION, uncounted", async () => {
    const s = await sandbox({ seed: 6, contacts: 5, tokens: ["pat-test-token"] });
    const bare = await fetch(`${s.url}/crm/v3/objects/contacts`);
    expect(bare.status).toBe(401);
    expect(((await bare.json()) as Json).category).toBe("INVALID_AUTHENTICATION");
    const wrong = await fetch(`${s.url}/crm/v3/objects/contacts`, {
      headers: { authorization: "Bearer other" },
    });
    expect(wrong.status).toBe(401);
    await wrong.arrayBuffer();
    expect((await get(s, "/crm/v3/objects/contacts")).headers.get("x-hubspot-ratelimit-remaining")).toBe(
      "99999",
    );
  });
});
