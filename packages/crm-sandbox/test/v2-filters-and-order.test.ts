import { describe, expect, it } from "vitest";
import { get, type Json, sandbox, walkCursor } from "./helpers.js";

const SIZES = { organizations: 80, persons: 150, deals: 300, leads: 20, activities: 120, notes: 20 };
const ids = (rows: Json[]) => rows.map((r) => String(r.id));
const byId = (a: string[]) => [...a].sort((x, y) => Number(x) - Number(y));
const time = (r: Json, key: string) => Date.parse(String(r[key]));

async function applyChanges(url: string): Promise<string> {
  const res = await fetch(`${url}/__sandbox/changes`, { method: "POST" });
  return ((await res.json()) as { at: string }).at;
}

describe("v2 updated_since / updated_until", () => {
  it("are a half-open range: a row updated exactly at the bound is in the range it starts, not the one it ends", async () => {
    const s = await sandbox({ seed: 5, ...SIZES, changeEdits: 6, changeAdds: 3 });
    // Every edited and added row is updated exactly at the moment the change set applied.
    const at = await applyChanges(s.url);
    const truth = s.truth(["persons"]).kinds.persons;
    const changed = byId([...truth.edited, ...truth.added]);
    const from = ids(await walkCursor(s, `/api/v2/persons?updated_since=${at}`, 4));
    const before = ids(await walkCursor(s, `/api/v2/persons?updated_until=${at}`, 40));
    expect(from).toEqual(changed);
    expect(before.filter((id) => changed.includes(id))).toEqual([]);
    expect(byId([...before, ...from])).toEqual(truth.ids);
  });

  it("split a list into adjacent ranges that together hold every row exactly once, whatever the order", async () => {
    const s = await sandbox({ seed: 5, ...SIZES });
    const all = ids(await walkCursor(s, "/api/v2/deals?status=open,won,lost,deleted", 500));
    const bounds = [
      "2019-01-01T00:00:00Z",
      "2021-06-01T00:00:00Z",
      "2023-02-03T04:05:06.789Z",
      "2030-01-01T00:00:00Z",
    ];
    const parts: string[] = [];
    for (let i = 0; i + 1 < bounds.length; i++)
      for (const sort of ["", "&sort_by=update_time", "&sort_by=add_time&sort_direction=desc"]) {
        const path = `/api/v2/deals?status=open,won,lost,deleted&updated_since=${bounds[i]}&updated_until=${bounds[i + 1]}${sort}`;
        const rows = await walkCursor(s, path, 7);
        for (const r of rows) {
          expect(time(r, "update_time")).toBeGreaterThanOrEqual(Date.parse(bounds[i]!) - 999);
          expect(time(r, "update_time")).toBeLessThan(Date.parse(bounds[i + 1]!));
        }
        if (sort === "") parts.push(...ids(rows));
        else expect(byId(ids(rows))).toEqual(byId(ids(await walkCursor(s, path.replace(sort, ""), 500))));
      }
    expect(parts.length).toBeGreaterThan(all.length / 4);
    expect(byId(parts)).toEqual(byId(all));
  });
});

describe("v2 sort_by / sort_direction", () => {
  it("order by update_time or add_time (ties by id), ascending by default, descending as the exact reverse", async () => {
    const s = await sandbox({ seed: 6, ...SIZES });
    for (const key of ["update_time", "add_time"]) {
      const asc = await walkCursor(s, `/api/v2/activities?sort_by=${key}`, 9);
      const ascExplicit = await walkCursor(s, `/api/v2/activities?sort_by=${key}&sort_direction=asc`, 50);
      const desc = await walkCursor(s, `/api/v2/activities?sort_by=${key}&sort_direction=desc`, 11);
      expect(ids(asc)).toHaveLength(120);
      expect(ids(ascExplicit)).toEqual(ids(asc));
      expect(ids(desc)).toEqual(ids(asc).reverse());
      for (let i = 1; i < asc.length; i++)
        expect(time(asc[i]!, key)).toBeGreaterThanOrEqual(time(asc[i - 1]!, key));
    }
    const idDesc = ids(await walkCursor(s, "/api/v2/organizations?sort_by=id&sort_direction=desc", 13));
    expect(idDesc).toEqual(byId(idDesc).reverse());
    expect(idDesc).toHaveLength(80);
  });

  it("keep a cursor walking a time-sorted list when the change set applies mid-walk: rows missed by none, edited ones met again at the end", async () => {
    const s = await sandbox({ seed: 7, ...SIZES, changeEdits: 10, changeAdds: 4 });
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 100; pages++) {
      const r = await get(
        s,
        `/api/v2/persons?sort_by=update_time&limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      expect(r.status).toBe(200);
      seen.push(...ids(r.body.data as Json[]));
      if (pages === 2) await applyChanges(s.url);
      cursor = (r.body.additional_data as { next_cursor: string | null }).next_cursor;
      if (cursor === null) break;
    }
    const truth = s.truth(["persons"]).kinds.persons;
    expect(byId([...new Set(seen)])).toEqual(truth.ids);
    const twice = seen.filter((id, i) => seen.indexOf(id) !== i);
    expect(twice.every((id) => truth.edited.includes(id))).toBe(true);
    expect(seen.slice(-(truth.edited.length + 4)).sort()).toEqual([...truth.edited, ...truth.added].sort());
  });

  it("answer 400 with the reason for a bad updated_until, sort_by, sort_direction or a cursor of another order", async () => {
    const s = await sandbox({ seed: 5, ...SIZES });
    const bad: [string, RegExp][] = [
      ["updated_until=yesterday", /updated_until must be an RFC 3339 date-time/],
      ["updated_until=2024-13-01T00:00:00Z", /updated_until must be an RFC 3339/],
      ["updated_until=2024-01-01", /updated_until must be an RFC 3339/],
      ["updated_since=2024-01-01 00:00:00", /updated_since must be an RFC 3339/],
      ["sort_by=name", /sort_by must be one of id, update_time, add_time/],
      ["sort_direction=up", /sort_direction must be asc or desc/],
    ];
    for (const [query, message] of bad) {
      const r = await get(s, `/api/v2/persons?${query}`);
      expect({ query, status: r.status }).toEqual({ query, status: 400 });
      expect(String(r.body.error)).toMatch(message);
    }
    const first = await get(s, "/api/v2/persons?sort_by=update_time&limit=5");
    const cursor = (first.body.additional_data as { next_cursor: string }).next_cursor;
    for (const other of ["", "sort_by=update_time&sort_direction=desc&", "sort_by=add_time&"]) {
      const r = await get(s, `/api/v2/persons?${other}cursor=${encodeURIComponent(cursor)}`);
      expect({ other, status: r.status, error: r.body.error }).toEqual({
        other,
        status: 400,
        error: "cursor is not valid for this sort",
      });
    }
  });
});

describe("v2 ids", () => {
  it("serve exactly the requested rows the list holds, leave out the rest, and refuse more than 100", async () => {
    const s = await sandbox({ seed: 5, ...SIZES });
    const all = ids(await walkCursor(s, "/api/v2/deals?status=open,won,lost,deleted", 500));
    const archived = ids(await walkCursor(s, "/api/v2/deals/archived", 500));
    const wanted = [all[3]!, all[0]!, all[all.length - 1]!, archived[0]!, "99999"];
    const res = await get(s, `/api/v2/deals?status=open,won,lost,deleted&ids=${wanted.join(",")}`);
    expect(res.status).toBe(200);
    // An archived deal is not in the normal list, and an unknown id is in no list: both left out.
    expect(ids(res.body.data as Json[])).toEqual(byId([all[0]!, all[3]!, all[all.length - 1]!]));
    expect((res.body.additional_data as Json).next_cursor).toBeNull();
    const tooMany = Array.from({ length: 101 }, (_, i) => i + 1).join(",");
    expect((await get(s, `/api/v2/persons?ids=${tooMany}`)).status).toBe(400);
    expect((await get(s, "/api/v2/persons?ids=1,x")).status).toBe(400);
  });
});
