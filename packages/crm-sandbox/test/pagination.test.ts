import { describe, expect, it } from "vitest";
import { ROW_KINDS } from "../src/index.js";
import { get, pagination, sandbox, walk } from "./helpers.js";

const SIZES = { organizations: 120, persons: 301, deals: 250, leads: 99, activities: 410, notes: 233 };

describe("v1 pagination", () => {
  it("walks every row of every kind exactly once, matching the truth", async () => {
    const s = await sandbox({ seed: 5, ...SIZES, archivedRate: 0 });
    const truth = s.truth();
    for (const kind of ROW_KINDS) {
      const path = kind === "activities" ? "/v1/activities?user_id=0" : `/v1/${kind}`;
      const rows = await walk(s, path, 37);
      const ids = rows.map((r) => String(r.id));
      expect(new Set(ids).size, kind).toBe(ids.length);
      expect(ids, kind).toEqual(truth.kinds[kind].ids);
      expect(truth.kinds[kind].count, kind).toBe(SIZES[kind]);
    }
  });

  it("announces next_start only while more items remain and returns data null past the end", async () => {
    const s = await sandbox({ organizations: 10 });
    const first = await get(s, "/v1/organizations?limit=4");
    expect(pagination(first)).toEqual({ start: 0, limit: 4, more_items_in_collection: true, next_start: 4 });
    const last = await get(s, "/v1/organizations?start=8&limit=4");
    expect((last.body.data as unknown[]).length).toBe(2);
    expect(pagination(last)).toEqual({ start: 8, limit: 4, more_items_in_collection: false });
    const past = await get(s, "/v1/organizations?start=10&limit=4");
    expect(past.body).toEqual({
      success: true,
      data: null,
      additional_data: { pagination: { start: 10, limit: 4, more_items_in_collection: false } },
    });
  });

  it("defaults to start 0 and limit 100 and clamps limits above 500", async () => {
    const s = await sandbox({ persons: 700 });
    const byDefault = await get(s, "/v1/persons");
    expect((byDefault.body.data as unknown[]).length).toBe(100);
    expect(pagination(byDefault)).toMatchObject({ start: 0, limit: 100, next_start: 100 });
    const huge = await get(s, "/v1/persons?limit=5000");
    expect((huge.body.data as unknown[]).length).toBe(500);
    expect(pagination(huge)).toMatchObject({ limit: 500, next_start: 500 });
  });

  it("rejects a start or limit that is not a number with 400", async () => {
    const s = await sandbox();
    expect((await get(s, "/v1/deals?start=abc")).status).toBe(400);
    expect((await get(s, "/v1/deals?limit=0")).status).toBe(400);
  });

  it("serves an empty kind as data null", async () => {
    const s = await sandbox({ leads: 0 });
    const r = await get(s, "/v1/leads");
    expect(r.body.data).toBeNull();
    expect(pagination(r).more_items_in_collection).toBe(false);
  });

  it("serves single records by id, leads by UUID, and 404s unknown ids", async () => {
    const s = await sandbox({ deals: 20, leads: 5 });
    const deal = await get(s, "/v1/deals/7");
    expect(deal.status).toBe(200);
    expect((deal.body.data as { id: number }).id).toBe(7);
    const leadId = s.truth(["leads"]).kinds.leads.ids[3] as string;
    const lead = await get(s, `/v1/leads/${leadId}`);
    expect((lead.body.data as { id: string }).id).toBe(leadId);
    expect((await get(s, "/v1/deals/21")).status).toBe(404);
    expect((await get(s, "/v1/leads/00000000-0000-4000-8000-000000000000")).status).toBe(404);
  });
});
