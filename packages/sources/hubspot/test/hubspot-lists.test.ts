import { OBJECT_TYPES } from "@drover/hubspot-sandbox";
import { describe, expect, it } from "vitest";
import {
  customFieldsOf,
  listBatches,
  readByIds,
  readListPage,
  readProperties,
  readWholeList,
} from "../src/index.js";
import { clientOf, idsOf, sandbox } from "./helpers.js";

describe("HubSpot lists", () => {
  it("read every live and every archived record of every type exactly once, archived ones flagged, custom properties kept", async () => {
    const s = await sandbox({
      seed: 3,
      companies: 230,
      contacts: 260,
      deals: 210,
      engagements: 120,
      archivedRate: 0.1,
      customProperties: 12,
    });
    const client = clientOf(s);
    for (const type of OBJECT_TYPES) {
      const properties = await readProperties(client, type);
      expect([...properties.custom].sort()).toEqual(
        Array.from({ length: 12 }, (_, i) => `drover_custom_${String(i + 1).padStart(2, "0")}`),
      );
      const batches = listBatches(client, type, properties.names);
      const live = await readWholeList(client, type, { archived: false, batches });
      const archived = await readWholeList(client, type, { archived: true, batches });
      const truth = s.ids(type);
      expect(idsOf(live), type).toEqual([...truth.live].sort());
      expect(idsOf(archived), type).toEqual([...truth.archived].sort());
      expect(truth.archived.length, type).toBeGreaterThan(0);
      let withCustom = 0;
      for (const row of live) {
        if (!("record" in row)) throw row.error;
        expect(row.record.archived).toBe(false);
        expect(Object.keys(row.record.properties)).toEqual(expect.arrayContaining(properties.names));
        const custom = customFieldsOf(row.record, properties.custom);
        for (const [name, value] of Object.entries(custom)) {
          expect(properties.custom.has(name)).toBe(true);
          expect(value).toBe(row.record.properties[name]);
        }
        if (Object.keys(custom).length > 0) withCustom++;
      }
      // About two records in three carry custom values in the sandbox.
      expect(withCustom, type).toBeGreaterThan(live.length / 3);
      for (const row of archived) {
        if (!("record" in row)) throw row.error;
        expect(row.record.archived).toBe(true);
        expect(row.record.archivedAt).toMatch(/^\d{4}-/);
      }
    }
    expect(s.stats().byStatus["414"] ?? 0).toBe(0);
  });

  it("read every property of every record when the property list is longer than a request URL may be", async () => {
    const s = await sandbox({
      seed: 4,
      contacts: 150,
      companies: 2,
      deals: 2,
      engagements: 2,
      customProperties: 1000,
    });
    const client = clientOf(s);
    const properties = await readProperties(client, "contacts");
    const batches = listBatches(client, "contacts", properties.names);
    // A thousand custom names do not fit one URL: the list is asked once per batch, and merged.
    expect(properties.names.join(",").length).toBeGreaterThan(16_384);
    expect(batches.length).toBeGreaterThan(1);
    expect(batches.flat()).toEqual(properties.names);
    const rows = await readWholeList(client, "contacts", { archived: false, batches });
    expect(idsOf(rows)).toEqual([...s.ids("contacts").live].sort());
    // The same records read by id carry their properties in the body, beyond any URL limit: every
    // value the batched list merged is the one HubSpot holds.
    const ids = idsOf(rows);
    const byId = await readByIds(client, "contacts", ids, { properties: properties.names });
    const expected = new Map(
      byId.rows.flatMap((r) => ("record" in r ? [[r.record.id, r.record.properties]] : [])),
    );
    for (const row of rows) {
      if (!("record" in row)) throw row.error;
      expect(row.record.properties).toEqual(expected.get(row.record.id));
      expect(Object.keys(row.record.properties).length).toBeGreaterThanOrEqual(properties.names.length);
    }
    const filled = rows.filter((r) => "record" in r && r.record.properties.drover_custom_1000 !== null);
    expect(filled.length).toBeGreaterThan(0);
    expect(s.stats().byStatus["414"] ?? 0).toBe(0);
  });
});

describe("a list page read in several property batches", () => {
  it("completes by id a record that a later batch's answer lacks (changed between the requests), and reads it whole", async () => {
    const s = await sandbox({
      seed: 9,
      contacts: 30,
      companies: 1,
      deals: 1,
      engagements: 1,
      customProperties: 40,
    });
    const dropped = s.ids("contacts").live[3] as string;
    // The answer to the batch without `email` leaves one record out, as if it changed in between.
    const between: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      const url = new URL(String(input));
      if (!url.pathname.endsWith("/contacts") || url.searchParams.get("properties")?.includes("email"))
        return res;
      const body = (await res.json()) as { results: { id: string }[] };
      body.results = body.results.filter((r) => r.id !== dropped);
      return new Response(JSON.stringify(body), { status: res.status, headers: res.headers });
    };
    const client = clientOf(s, { fetch: between });
    const properties = await readProperties(client, "contacts");
    const batches = [properties.names.slice(0, 10), properties.names.slice(10)];
    expect(batches[0]).toContain("email");
    const page = await readListPage(client, "contacts", { after: null, archived: false, batches });
    // Two list requests and one batch read for the record the second answer lacked.
    expect(page.requests).toBe(3);
    const row = page.rows.find((r) => "record" in r && r.record.id === dropped);
    if (!row || !("record" in row)) throw new Error("the dropped record should be on the page");
    expect(Object.keys(row.record.properties)).toEqual(expect.arrayContaining(properties.names));
    expect(row.record.properties.drover_custom_40).toBe(
      (
        await readByIds(clientOf(s), "contacts", [dropped], { properties: ["drover_custom_40"] })
      ).rows.flatMap((r) => ("record" in r ? [r.record.properties.drover_custom_40] : []))[0],
    );
  });
});
