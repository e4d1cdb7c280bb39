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

describe("archives in a round", () => {
  it("move exactly that many live records to the archived list, with archivedAt the round's time and the modification time unmoved: no search finds them", async () => {
    const s = await sandbox({
      seed: 43,
      contacts: 60,
      companies: 1,
      deals: 1,
      engagements: 1,
      archivedRate: 0.1,
    });
    const list = async (archived: boolean) =>
      (await get(s, `/crm/v3/objects/contacts?limit=100&archived=${archived}&properties=lastmodifieddate`))
        .body.results as { id: string; archivedAt?: string; properties: { lastmodifieddate: string } }[];
    const liveBefore = new Map((await list(false)).map((r) => [r.id, r.properties.lastmodifieddate]));
    const archivedBefore = new Set((await list(true)).map((r) => r.id));
    const round = s.applyChanges(Date.parse("2026-12-07T10:00:00Z"), { archives: 3 });
    const archivedNow = (await list(true)).filter((r) => !archivedBefore.has(r.id));
    expect(archivedNow).toHaveLength(3);
    for (const r of archivedNow) {
      expect(liveBefore.has(r.id)).toBe(true);
      expect(r.archivedAt).toBe(round.at);
      expect(r.properties.lastmodifieddate).toBe(liveBefore.get(r.id));
    }
    expect((await list(false)).length).toBe(liveBefore.size - 3);
    const total = (await post(s, "/crm/v3/objects/contacts/search", { filterGroups: [], limit: 1 })).body
      .total;
    expect(total).toBe(liveBefore.size - 3);
    // A round without archives archives nothing more.
    s.applyChanges(Date.parse("2026-12-07T11:00:00Z"));
    expect((await list(true)).length).toBe(archivedBefore.size + 3);
    // A restore brings the first archived back to the live list, its modification time still unmoved.
    s.applyChanges(Date.parse("2026-12-07T12:00:00Z"), { restores: 1 });
    const archivedAfter = new Set((await list(true)).map((r) => r.id));
    const back = archivedNow.filter((r) => !archivedAfter.has(r.id));
    expect(back).toHaveLength(1);
    const live = new Map((await list(false)).map((r) => [r.id, r.properties.lastmodifieddate]));
    expect(live.get(back[0]!.id)).toBe(liveBefore.get(back[0]!.id));
    expect(live.size).toBe(liveBefore.size - 2);
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
