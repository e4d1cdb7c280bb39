import { describe, expect, it } from "vitest";
import { get, type Json, sandbox, walk, walkCursor } from "./helpers.js";

const SIZES = { organizations: 80, persons: 150, deals: 300, leads: 200, activities: 120, notes: 90 };
const ids = (rows: Json[]) => rows.map((r) => String(r.id));
const sorted = (a: string[]) => [...a].sort((x, y) => x.length - y.length || (x < y ? -1 : x > y ? 1 : 0));

describe("v2 cursor lists", () => {
  it("walk every organization, person and activity once with plain ids and RFC 3339 times", async () => {
    const s = await sandbox({ seed: 3, ...SIZES });
    const truth = s.truth();
    for (const kind of ["organizations", "persons", "activities"] as const) {
      const rows = await walkCursor(s, `/api/v2/${kind}`, 37);
      expect(ids(rows), kind).toEqual(truth.kinds[kind].ids);
      for (const r of rows) {
        expect(String(r.add_time), kind).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
        for (const key of ["org_id", "person_id", "owner_id", "deal_id"])
          if (key in r) expect(r[key] === null || typeof r[key] === "number", `${kind}.${key}`).toBe(true);
        // v2 activities carry no custom fields.
        if (kind === "activities") expect(r).not.toHaveProperty("custom_fields");
        else expect(typeof r.custom_fields, kind).toBe("object");
      }
    }
  });

  it("show a person without email as [] in v2 and as one empty primary entry in v1", async () => {
    const s = await sandbox({ seed: 3, ...SIZES });
    const without = s.truth(["persons"]).kinds.persons.withoutEmail[0]!;
    const v2 = await get(s, `/api/v2/persons/${without}`);
    expect((v2.body.data as Json).emails).toEqual([]);
    const v1 = await get(s, `/v1/persons/${without}`);
    expect((v1.body.data as Json).email).toEqual([{ value: "", primary: true }]);
  });

  it("show a record's custom fields as v1's root keys with companions and as v2's custom_fields objects, alike", async () => {
    const s = await sandbox({ seed: 3, ...SIZES });
    const kinds = { monetary: 0, range: 0, address: 0 };
    for (let id = 1; id <= 60; id++) {
      const v1 = (await get(s, `/v1/deals/${id}`)).body.data as Json;
      const v2 = ((await get(s, `/api/v2/deals/${id}`)).body.data as Json).custom_fields as Json;
      for (const [key, value] of Object.entries(v2)) {
        expect(key).toMatch(/^[0-9a-f]{40}$/);
        const root = (suffix: string) => v1[`${key}${suffix}`];
        if (value === null) {
          expect(root(""), key).toBeNull();
          continue;
        }
        if (typeof value !== "object") expect(root("")).toBe(value);
        else if ("currency" in value) {
          kinds.monetary++;
          expect(value).toEqual({ value: root(""), currency: root("_currency") });
        } else if ("until" in value) {
          kinds.range++;
          expect(value).toMatchObject({ value: root(""), until: root("_until") });
        } else {
          kinds.address++;
          expect(value).toMatchObject({
            value: root(""),
            route: root("_route"),
            postal_code: root("_postal_code"),
          });
          expect(typeof root("_formatted_address")).toBe("string");
        }
      }
    }
    expect(Object.values(kinds).every((n) => n > 0)).toBe(true);
    // A lead leaves a field without a value out, companions and all (a set address may lack parts).
    const leads = (await get(s, "/v1/leads?limit=100")).body.data as Json[];
    const currencies = leads.filter((l) => Object.keys(l).some((k) => /^[0-9a-f]{40}_currency$/.test(k)));
    expect(currencies.length).toBeGreaterThan(10);
    expect(currencies.length).toBeLessThan(leads.length);
    for (const lead of leads)
      for (const [k, v] of Object.entries(lead)) {
        const field = /^[0-9a-f]{40}/.exec(k)?.[0];
        if (field) expect(lead[field], k).not.toBeNull();
        if (k === field) expect(v).not.toBeNull();
      }
  });

  it("list deleted deals only when status asks for them, and archived deals only in the archived list", async () => {
    const s = await sandbox({ seed: 3, ...SIZES, archivedRate: 0.1, deletedDealRate: 0.1 });
    const truth = s.truth(["deals"]).kinds.deals;
    expect(truth.archived.length).toBeGreaterThan(0);
    expect(truth.deleted.length).toBeGreaterThan(0);
    const normal = ids(await walkCursor(s, "/api/v2/deals", 100));
    const withDeleted = await walkCursor(s, "/api/v2/deals?status=open,won,lost,deleted", 100);
    const archived = ids(await walkCursor(s, "/api/v2/deals/archived", 100));
    expect(normal.filter((id) => truth.deleted.includes(id) || truth.archived.includes(id))).toEqual([]);
    expect(withDeleted.filter((r) => r.is_deleted === true).map((r) => String(r.id))).toEqual(truth.deleted);
    expect(archived).toEqual(truth.archived);
    expect(sorted([...ids(withDeleted), ...archived])).toEqual(truth.ids);
  });

  it("lists archived leads only under /v1/leads/archived, with UUID ids", async () => {
    const s = await sandbox({ seed: 3, ...SIZES, archivedRate: 0.1 });
    const truth = s.truth(["leads"]).kinds.leads;
    const live = ids(await walk(s, "/v1/leads", 50));
    const archived = ids(await walk(s, "/v1/leads/archived", 50));
    expect(archived).toEqual(truth.archived);
    expect(new Set([...live, ...archived])).toEqual(new Set(truth.ids));
    expect(live.filter((id) => archived.includes(id))).toEqual([]);
    expect(live[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

describe("mail bodies", () => {
  it("come with the per-deal list only where the account honours include_body; a body-less message's body is absent, null or empty on both", async () => {
    const served = new Map<string, string>();
    for (const listIncludeBody of [1, 0]) {
      const s = await sandbox({ seed: 3, deals: 60, mailPerDealMax: 5, listIncludeBody });
      const truth = s.truth(["mail"]).kinds.mail;
      expect(truth.bodyless.length).toBeGreaterThan(2);
      for (let deal = 1; deal <= 60; deal++) {
        const items = (await walk(s, `/v1/deals/${deal}/mailMessages?include_body=1`, 100)).map(
          (w) => w.data as Json,
        );
        for (const m of items) {
          const id = String(m.id);
          const state = !("body" in m)
            ? "absent"
            : m.body === null
              ? "null"
              : m.body === ""
                ? "empty"
                : "html";
          if (m.has_body_flag === 1) expect(state, id).toBe(listIncludeBody === 1 ? "html" : "absent");
          else {
            expect(state, id).not.toBe("html");
            // The same message is served the same way on either kind of account.
            if (served.has(id)) expect(state, id).toBe(served.get(id));
            served.set(id, state);
          }
        }
      }
      const one = await get(
        s,
        `/v1/mailbox/mailMessages/${truth.ids.find((id) => !truth.bodyless.includes(id))}?include_body=1`,
      );
      expect(typeof (one.body.data as Json).body).toBe("string");
    }
    expect(new Set(served.values())).toEqual(new Set(["absent", "null", "empty"]));
  });
});

describe("changes during a run", () => {
  it("edit and add rows after they apply, visible through updated_since and in the truth", async () => {
    const s = await sandbox({ seed: 3, ...SIZES, changeEdits: 4, changeAdds: 3 });
    const before = new Date().toISOString();
    expect(ids(await walkCursor(s, `/api/v2/deals?updated_since=${before}`, 100))).toEqual([]);
    expect((await fetch(`${s.url}/__sandbox/changes`, { method: "POST" })).status).toBe(200);
    const truth = s.truth(["deals", "notes"]).kinds;
    expect(truth.deals.edited).toHaveLength(4);
    expect(truth.deals.added).toEqual(["301", "302", "303"]);
    expect(truth.deals.ids).toHaveLength(303);
    const changed = await walkCursor(
      s,
      `/api/v2/deals?status=open,won,lost,deleted&updated_since=${before}`,
      2,
    );
    const archived = await walkCursor(s, `/api/v2/deals/archived?updated_since=${before}`, 2);
    expect(sorted([...ids(changed), ...ids(archived)])).toEqual(
      sorted([...truth.deals.edited, ...truth.deals.added]),
    );
    for (const r of changed)
      if (truth.deals.edited.includes(String(r.id))) expect(String(r.title)).toMatch(/\(edited\)$/);
    // The change shows in the v1 notes' update_time, and their documented updated_since lists it alone.
    const notes = await walk(s, "/v1/notes", 500);
    const changedNotes = sorted([...truth.notes.edited, ...truth.notes.added]);
    expect(
      notes.filter((n) => String(n.update_time) >= before.slice(0, 10)).map((n) => String(n.id)),
    ).toEqual(changedNotes);
    expect(ids(await walk(s, `/v1/notes?updated_since=${before}`, 2))).toEqual(changedNotes);
  });

  it("v1 leads and notes honour updated_since as their reference documents it; archived leads ignore it", async () => {
    const s = await sandbox({ seed: 4, ...SIZES, leads: 60, changeEdits: 5, changeAdds: 3 });
    const before = new Date().toISOString();
    const allLeads = ids(await walk(s, "/v1/leads", 500));
    const archivedLeads = ids(await walk(s, "/v1/leads/archived", 500));
    expect(ids(await walk(s, `/v1/leads?updated_since=${before}`, 10))).toEqual([]);
    expect(ids(await walk(s, `/v1/leads/archived?updated_since=${before}`, 500))).toEqual(archivedLeads);
    // A bound before every row: the whole list, in the same order.
    expect(ids(await walk(s, "/v1/leads?updated_since=2000-01-01T00:00:00Z", 7))).toEqual(allLeads);
    expect((await fetch(`${s.url}/__sandbox/changes`, { method: "POST" })).status).toBe(200);
    const truth = s.truth(["leads", "notes"]).kinds;
    const archivedNow = new Set(ids(await walk(s, "/v1/leads/archived", 500)));
    const changedLeads = ids(await walk(s, `/v1/leads?updated_since=${before}`, 2));
    expect(changedLeads.length).toBeGreaterThan(0);
    expect(sorted(changedLeads)).toEqual(
      sorted([...truth.leads.edited, ...truth.leads.added].filter((id) => !archivedNow.has(id))),
    );
    const bad = await get(s, "/v1/notes?updated_since=yesterday");
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toMatch(/updated_since must be an RFC 3339 date-time/);
  });
});

describe("rounds of changes", () => {
  it("edit the same rows again, add rows and delete deals of their own, each at its own time", async () => {
    const s = await sandbox({ seed: 5, ...SIZES, changeEdits: 3, changeAdds: 2, changeDeletes: 2 });
    expect(s.applyChanges(Date.parse("2030-01-01T00:00:00Z"))).toBe(true);
    const first = s.truth(["deals"]).kinds.deals;
    expect(first.added).toEqual(["301", "302"]);
    expect(s.applyChanges()).toBe(false);
    expect(s.applyChangesAgain(Date.parse("2030-01-01T00:01:00Z"))).toBe(true);
    const second = s.truth(["deals"]).kinds.deals;
    expect(second.added).toEqual(["301", "302", "303", "304"]);
    // Two deals more deleted by the second round, none of them archived or edited.
    expect(second.deleted.length).toBe(first.deleted.length + 2);
    const newlyDeleted = second.deleted.filter((id) => !first.deleted.includes(id));
    expect(newlyDeleted).toHaveLength(2);
    for (const id of newlyDeleted) {
      expect(second.archived).not.toContain(id);
      expect(second.edited).not.toContain(id);
    }
    // Only the second round's changes are newer than the first round.
    const since = "2030-01-01T00:00:30.000Z";
    const changed = await walkCursor(
      s,
      `/api/v2/deals?status=open,won,lost,deleted&updated_since=${since}`,
      3,
    );
    const archived = await walkCursor(s, `/api/v2/deals/archived?updated_since=${since}`, 3);
    const all = [...changed, ...archived];
    expect(sorted(ids(all))).toEqual(sorted([...second.edited, "303", "304", ...newlyDeleted]));
    for (const r of all) {
      if (second.edited.includes(String(r.id))) expect(String(r.title)).toMatch(/\(edited 2\)$/);
      if (newlyDeleted.includes(String(r.id))) expect(r.is_deleted).toBe(true);
    }
    // Without status=deleted, a deleted deal is not listed.
    const open = await walkCursor(s, `/api/v2/deals?updated_since=${since}`, 3);
    expect(ids(open).some((id) => newlyDeleted.includes(id))).toBe(false);
  });
});

describe("rows a round deletes, other than deals", () => {
  it("leave every list, `ids` lists included, and are answered by id as Pipedrive answers a deleted record", async () => {
    const s = await sandbox({ seed: 6, ...SIZES, changeDeletes: 2 });
    expect(s.applyChanges(Date.parse("2030-01-01T00:00:00Z"))).toBe(true);
    const truth = s.truth().kinds;
    for (const kind of ["organizations", "persons", "activities"] as const) {
      const deleted = truth[kind].deleted;
      expect(deleted, kind).toHaveLength(2);
      const listed = ids(await walkCursor(s, `/api/v2/${kind}`, 50));
      expect(
        listed.filter((id) => deleted.includes(id)),
        kind,
      ).toEqual([]);
      expect(listed.length, kind).toBe(truth[kind].ids.length - 2);
      const byIds = await get(s, `/api/v2/${kind}?ids=${deleted.join(",")},1`);
      expect(ids(byIds.body.data as Json[]), kind).toEqual(["1"]);
      // Marked deleted for 30 days (DELETE "marks ... as deleted"), its update time the deletion's.
      for (const id of deleted) {
        const one = await get(s, `/api/v2/${kind}/${id}`);
        expect(one.status, `${kind} ${id}`).toBe(200);
        expect((one.body.data as Json).is_deleted, `${kind} ${id}`).toBe(true);
        expect((one.body.data as Json).update_time).toBe("2030-01-01T00:00:00Z");
      }
      // A round's deletion is a change: the v2 lists' updated_since does not show it (the row is gone).
      const changed = ids(await walkCursor(s, `/api/v2/${kind}?updated_since=2030-01-01T00:00:00Z`, 50));
      expect(
        changed.filter((id) => deleted.includes(id)),
        kind,
      ).toEqual([]);
    }
    // v1 notes: out of the list, full pages still; by id, the note with active_flag false.
    const notes = ids(await walk(s, "/v1/notes", 7));
    expect(notes).toHaveLength(truth.notes.ids.length - 2);
    expect(notes.filter((id) => truth.notes.deleted.includes(id))).toEqual([]);
    for (const id of truth.notes.deleted) {
      const one = await get(s, `/v1/notes/${id}`);
      expect(one.status).toBe(200);
      expect((one.body.data as Json).active_flag).toBe(false);
    }
    // Leads are deleted outright: in neither list, and 404 by id.
    const leads = ids([...(await walk(s, "/v1/leads", 500)), ...(await walk(s, "/v1/leads/archived", 500))]);
    expect(leads).toHaveLength(truth.leads.ids.length - 2);
    for (const id of truth.leads.deleted) {
      expect(leads).not.toContain(id);
      const one = await get(s, `/v1/leads/${id}`);
      expect(one.status).toBe(404);
      expect(one.body).toMatchObject({ success: false, error: "Lead not found" });
    }
  });
});

describe("changes after a number of requests", () => {
  it("apply by themselves once the sandbox has served that many API requests, and only once", async () => {
    const s = await sandbox({ seed: 4, ...SIZES, changeEdits: 2, changeAdds: 1, changesAfterRequests: 3 });
    expect(s.truth(["persons"]).kinds.persons.ids).toHaveLength(150);
    for (let i = 0; i < 2; i++) await get(s, "/api/v2/persons?limit=1");
    expect(s.truth(["persons"]).kinds.persons.added).toEqual([]);
    await get(s, "/api/v2/persons?limit=1");
    const truth = s.truth(["persons"]).kinds.persons;
    expect(truth.added).toEqual(["151"]);
    expect(truth.edited).toHaveLength(2);
    expect(s.applyChanges()).toBe(false);
  });
});

describe("answers asked again", () => {
  it("are the same text until a round of changes applies, then the changed one; limits and counters still count each request", async () => {
    const s = await sandbox({ seed: 6, ...SIZES, changeEdits: 300, changeAdds: 1 });
    const pages = ["/api/v2/deals?limit=50&status=open,won,lost,deleted", "/v1/notes?limit=50&start=0"];
    const first = await Promise.all(pages.map((p) => get(s, p)));
    const again = await Promise.all(pages.map((p) => get(s, p)));
    expect(again.map((r) => r.text)).toEqual(first.map((r) => r.text));
    // The burst window's headers are the request's own, not the first answer's.
    expect(Number(again[0]!.headers.get("x-ratelimit-remaining"))).toBeLessThan(
      Number(first[0]!.headers.get("x-ratelimit-remaining")),
    );
    expect(s.applyChanges()).toBe(true);
    const changed = await Promise.all(pages.map((p) => get(s, p)));
    for (const [i, r] of changed.entries()) {
      expect(r.text, pages[i]).not.toEqual(first[i]!.text);
      const rows = r.body.data as Json[];
      expect(
        rows.some((row) => /\(edited\)$/.test(String(row.title ?? row.content))),
        pages[i],
      ).toBe(true);
    }
    expect(s.stats().requests).toBe(6);
  });
});
