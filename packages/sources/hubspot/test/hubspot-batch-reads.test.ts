import { describe, expect, it } from "vitest";
import { ASSOCIATION_PAIRS, readAssociations, readByIds } from "../src/index.js";
import { clientOf, idsOf, RecordingPacer, sandbox } from "./helpers.js";

describe("HubSpot reads by id", () => {
  it("takes a 207 batch read as a partial success: the records found, and one miss per id not found", async () => {
    const s = await sandbox({
      seed: 21,
      contacts: 180,
      companies: 1,
      deals: 1,
      engagements: 1,
      archivedRate: 0.1,
    });
    const pacer = new RecordingPacer();
    const client = clientOf(s, { pacer });
    const { live, archived } = s.ids("contacts");
    const absent = ["1000009991", "1000009992", "1000009993"];
    const asked = [...live.slice(0, 150), archived[0] as string, ...absent];
    const read = await readByIds(client, "contacts", asked, { properties: ["email", "firstname"] });
    // 154 ids: two requests of at most 100; the second answered 207.
    expect(pacer.answers.map((a) => a.status)).toEqual([200, 207]);
    expect(idsOf(read.rows)).toEqual(live.slice(0, 150).sort());
    for (const row of read.rows) {
      if (!("record" in row)) throw row.error;
      expect(Object.keys(row.record.properties)).toEqual(expect.arrayContaining(["email", "firstname"]));
    }
    // An archived record is not found among the live ones: a miss like an id that never was.
    expect(read.misses.map((m) => m.id).sort()).toEqual([archived[0], ...absent].sort());
    expect(new Set(read.misses.map((m) => m.category))).toEqual(new Set(["OBJECT_NOT_FOUND"]));
    const again = await readByIds(client, "contacts", [archived[0] as string], {
      properties: [],
      archived: true,
    });
    expect(idsOf(again.rows)).toEqual([archived[0]]);
    expect(again.misses).toEqual([]);
  });

  it("reads every association of every pair the product links, from the child's side, the primary company marked", async () => {
    const s = await sandbox({
      seed: 22,
      companies: 60,
      contacts: 1_100,
      deals: 90,
      engagements: 70,
      archivedRate: 0.05,
    });
    const client = clientOf(s);
    let primaries = 0;
    for (const [child, parent] of ASSOCIATION_PAIRS) {
      const { live, archived } = s.ids(child);
      const links = await readAssociations(client, child, parent, [...live, ...archived]);
      const read = [...links.values()].flat().map((l) => [l.fromId, l.toId].join(">"));
      const truth = s.links(child, parent).map(([c, p]) => `${c}>${p}`);
      expect(read.sort(), `${child}→${parent}`).toEqual(truth.sort());
      expect(truth.length, `${child}→${parent}`).toBeGreaterThan(0);
      for (const link of [...links.values()].flat()) {
        expect(link.typeIds.length).toBeGreaterThan(0);
        if (link.primary) primaries++;
      }
    }
    expect(primaries).toBeGreaterThan(0);
  });
});
