import { describe, expect, it } from "vitest";
import { type Json, post, sandbox } from "./helpers.js";

const results = (body: Json) => body.results as Json[];

describe("POST /crm/v3/objects/{type}/batch/read", () => {
  it("reads 100 ids at once with the named properties, and refuses 101", async () => {
    const s = await sandbox({ seed: 11, companies: 150, archivedRate: 0 });
    const wanted = s.ids("companies").live.slice(0, 100);
    const r = await post(s, "/crm/v3/objects/companies/batch/read", {
      inputs: wanted.map((id) => ({ id })),
      properties: ["name"],
    });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("COMPLETE");
    expect(results(r.body).map((x) => x.id)).toEqual(wanted);
    for (const row of results(r.body))
      expect(Object.keys(row.properties as Json).sort()).toEqual([
        "createdate",
        "hs_lastmodifieddate",
        "hs_object_id",
        "name",
      ]);
    const tooMany = await post(s, "/crm/v3/objects/companies/batch/read", {
      inputs: s
        .ids("companies")
        .live.slice(0, 101)
        .map((id) => ({ id })),
    });
    expect(tooMany.status).toBe(400);
  });

  it("answers 207 naming the ids it could not find, and still returns the records it found", async () => {
    const s = await sandbox({ seed: 15, deals: 30, archivedRate: 0.3 });
    const [live] = s.ids("deals").live;
    const [archived] = s.ids("deals").archived;
    const r = await post(s, "/crm/v3/objects/deals/batch/read", {
      inputs: [{ id: live }, { id: archived }, { id: "12" }],
    });
    expect(r.status).toBe(207);
    expect(results(r.body).map((x) => x.id)).toEqual([live]);
    expect(r.body.numErrors).toBe(1);
    const [error] = r.body.errors as { category: string; message: string; context: { ids: string[] } }[];
    expect(error?.category).toBe("OBJECT_NOT_FOUND");
    expect(error?.message).toMatch(/^Could not get some DEAL objects/);
    expect(error?.context.ids).toEqual([archived, "12"]);
  });
});

describe("POST /crm/v3/objects/{type}/search", () => {
  it("pages by offset up to the 10,000th result and refuses the page past it with a 400", async () => {
    const s = await sandbox({ seed: 12, contacts: 10_250, archivedRate: 0, customProperties: 0 });
    const body = {
      limit: 200,
      sorts: [{ propertyName: "hs_object_id", direction: "ASCENDING" }],
      properties: ["email"],
    };
    const first = await post(s, "/crm/v3/objects/contacts/search", body);
    expect(first.status).toBe(200);
    expect(first.body.total).toBe(10_250);
    expect((first.body.paging as { next: { after: string } }).next.after).toBe("200");
    const lastAllowed = await post(s, "/crm/v3/objects/contacts/search", { ...body, after: "9800" });
    expect(lastAllowed.status).toBe(200);
    expect(results(lastAllowed.body)).toHaveLength(200);
    // The API still offers the next page: following it is what fails.
    expect((lastAllowed.body.paging as { next: { after: string } }).next.after).toBe("10000");
    const beyond = await post(s, "/crm/v3/objects/contacts/search", { ...body, after: "10000" });
    expect(beyond.status).toBe(400);
    expect(beyond.body.category).toBe("VALIDATION_ERROR");
    expect((await post(s, "/crm/v3/objects/contacts/search", { ...body, limit: 201 })).status).toBe(400);
  });

  it("finds by hs_lastmodifieddate the records a mid-run round of changes edited and added, and nothing else", async () => {
    const s = await sandbox({ seed: 13, deals: 500, changeEdits: 7, changeAdds: 3, archivedRate: 0 });
    const since = Date.now();
    const window = (from: number, to: number) => ({
      filterGroups: [
        {
          filters: [
            { propertyName: "hs_lastmodifieddate", operator: "GTE", value: String(from) },
            { propertyName: "hs_lastmodifieddate", operator: "LT", value: String(to) },
          ],
        },
      ],
      sorts: [{ propertyName: "hs_lastmodifieddate", direction: "ASCENDING" }],
      properties: ["dealname"],
      limit: 100,
    });
    const before = await post(s, "/crm/v3/objects/deals/search", window(since, since + 3_600_000));
    expect(before.body.total).toBe(0);
    const round = s.applyChanges(since + 1000);
    expect(round.round).toBe(1);
    const after = await post(s, "/crm/v3/objects/deals/search", window(since, since + 3_600_000));
    expect(after.body.total).toBe(10);
    const names = results(after.body).map((r) => (r.properties as Json).dealname as string);
    expect(names.filter((n) => n.endsWith("(edited 1)"))).toHaveLength(7);
    expect(results(after.body).every((r) => r.updatedAt === round.at)).toBe(true);
    const added = results(after.body).filter(
      (r) => !((r.properties as Json).dealname as string).includes("edited"),
    );
    expect(added.map((r) => Number(r.id))).toEqual([7_000_000_501, 7_000_000_502, 7_000_000_503]);
    // A window that ends before the round sees none of it.
    expect((await post(s, "/crm/v3/objects/deals/search", window(since, since + 1000))).body.total).toBe(0);
  });
});

describe("searching contacts by modification date", () => {
  it("finds a round's contacts by lastmodifieddate, and nothing by hs_lastmodifieddate, as HubSpot's contacts search does", async () => {
    const s = await sandbox({ seed: 16, contacts: 200, changeEdits: 4, changeAdds: 2, archivedRate: 0 });
    const since = Date.now();
    s.applyChanges(since + 500);
    const by = (propertyName: string) => ({
      filterGroups: [{ filters: [{ propertyName, operator: "GTE", value: String(since) }] }],
      limit: 100,
    });
    expect((await post(s, "/crm/v3/objects/contacts/search", by("lastmodifieddate"))).body.total).toBe(6);
    const silent = await post(s, "/crm/v3/objects/contacts/search", by("hs_lastmodifieddate"));
    expect(silent.status).toBe(200);
    expect(silent.body.total).toBe(0);
  });
});

describe("POST /crm/v4/associations/{from}/{to}/batch/read", () => {
  it("names each input's associated records with HubSpot's type ids, in both directions", async () => {
    const s = await sandbox({ seed: 14, companies: 20, contacts: 60, archivedRate: 0 });
    const contacts = s.ids("contacts").live.slice(0, 40);
    const forward = await post(s, "/crm/v4/associations/contacts/companies/batch/read", {
      inputs: contacts.map((id) => ({ id })),
    });
    expect(forward.status).toBe(200);
    const links = new Map<string, string>();
    let primaries = 0;
    for (const row of results(forward.body)) {
      const to = row.to as { toObjectId: string; associationTypes: Json[] }[];
      expect(to).toHaveLength(1);
      // Most contacts' company is their primary one: listed under the unlabelled type, then "Primary".
      const types = to[0]?.associationTypes.map((t) => t.typeId);
      expect([[279], [279, 1]]).toContainEqual(types);
      if (types?.length === 2)
        expect(to[0]?.associationTypes[1]).toEqual({
          category: "HUBSPOT_DEFINED",
          typeId: 1,
          label: "Primary",
        });
      primaries += types?.length === 2 ? 1 : 0;
      links.set((row.from as Json).id as string, to[0]?.toObjectId as string);
    }
    expect(links.size).toBeGreaterThan(25);
    expect(primaries).toBeGreaterThan(5);
    expect(primaries).toBeLessThan(links.size);
    const [contact, company] = [...links.entries()][0] as [string, string];
    const backward = await post(s, "/crm/v4/associations/companies/contacts/batch/read", {
      inputs: [{ id: company }],
    });
    const back = results(backward.body)[0]?.to as { toObjectId: string; associationTypes: Json[] }[];
    expect(back.map((t) => t.toObjectId)).toContain(contact);
    for (const t of back) expect([[280], [280, 2]]).toContainEqual(t.associationTypes.map((x) => x.typeId));
    const notes = await post(s, "/crm/v4/associations/notes/contacts/batch/read", {
      inputs: s
        .ids("notes")
        .live.slice(0, 20)
        .map((id) => ({ id })),
    });
    const noteTypes = results(notes.body).flatMap((row) =>
      (row.to as { associationTypes: Json[] }[]).map((t) => t.associationTypes),
    );
    expect(noteTypes.length).toBeGreaterThan(5);
    for (const types of noteTypes)
      expect(types).toEqual([{ category: "HUBSPOT_DEFINED", typeId: 202, label: null }]);
  });

  it("answers, for every linked pair, exactly the links the sandbox's truth names", async () => {
    const s = await sandbox({ seed: 17, companies: 30, contacts: 80, deals: 70, engagements: 60 });
    const truth = s.truth();
    for (const key of ["deals:contacts", "notes:deals", "calls:companies", "contacts:companies"]) {
      const [from, to] = key.split(":") as [string, string];
      const served: [string, string][] = [];
      const ids = [...truth.types[from as "deals"].live, ...truth.types[from as "deals"].archived];
      for (let i = 0; i < ids.length; i += 100) {
        const r = await post(s, `/crm/v4/associations/${from}/${to}/batch/read`, {
          inputs: ids.slice(i, i + 100).map((id) => ({ id })),
        });
        for (const row of results(r.body))
          for (const t of row.to as { toObjectId: string }[])
            served.push([(row.from as Json).id as string, t.toObjectId]);
      }
      const expected = truth.links[key] ?? [];
      expect(expected.length, key).toBeGreaterThan(10);
      expect(served.sort(), key).toEqual([...expected].sort());
    }
  });
});
