import { describe, expect, it } from "vitest";
import { get, type Json, post, sandbox } from "./helpers.js";

const since = (ms: number) => ({
  filterGroups: [{ filters: [{ propertyName: "hs_lastmodifieddate", operator: "GTE", value: String(ms) }] }],
  limit: 200,
});

describe("mid-run changes", () => {
  it("applies a round by itself after the configured number of API requests, and another on POST /__sandbox/changes", async () => {
    const start = Date.now();
    const s = await sandbox({
      seed: 41,
      engagements: 50,
      changeEdits: 2,
      changeAdds: 1,
      changesAfterRequests: 3,
    });
    const count = async () => (await post(s, "/crm/v3/objects/notes/search", since(start))).body.total;
    expect(await count()).toBe(0);
    expect(await count()).toBe(0);
    // The third request applies the round before it is answered.
    expect(await count()).toBe(3);
    const round = (await fetch(`${s.url}/__sandbox/changes`, { method: "POST" }).then((r) =>
      r.json(),
    )) as Json;
    expect(round.round).toBe(2);
    // The same two records edited again, and one more added.
    expect(await count()).toBe(4);
    const names = (
      await post(s, "/crm/v3/objects/notes/search", { ...since(start), properties: ["hs_note_body"] })
    ).body.results as { properties: { hs_note_body: string } }[];
    expect(names.filter((n) => n.properties.hs_note_body.includes("(edited 2)"))).toHaveLength(2);
  });
});

describe("determinism", () => {
  it("serves the same records for the same seed, and different ones for another", async () => {
    const page = async (seed: number) => {
      const s = await sandbox({ seed, contacts: 50 });
      const r = await get(s, "/crm/v3/objects/contacts?limit=50&properties=email,firstname,drover_custom_01");
      return JSON.stringify(r.body.results);
    };
    expect(await page(7)).toBe(await page(7));
    expect(await page(7)).not.toBe(await page(8));
  });
});
