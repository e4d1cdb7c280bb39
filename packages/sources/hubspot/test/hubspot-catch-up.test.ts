import { describe, expect, it } from "vitest";
import {
  type ChangePage,
  type ChangeWindow,
  changedRecords,
  type HubSpotClient,
  SEARCH_CAP,
} from "../src/index.js";
import type { ObjectType } from "../src/object-types.js";
import { clientOf, idsOf, sandbox } from "./helpers.js";

async function readChanges(
  client: HubSpotClient,
  type: ObjectType,
  window: ChangeWindow,
  from?: { window: ChangeWindow; lastId: string },
): Promise<ChangePage[]> {
  const pages: ChangePage[] = [];
  for await (const page of changedRecords(client, type, window, {
    properties: [],
    ...(from ? { from } : {}),
  }))
    pages.push(page);
  return pages;
}

const everything: ChangeWindow = { since: 0, until: Date.UTC(2030, 0, 1) };

/** Records per window the walk read, keyed `since-until`. */
function perWindow(pages: readonly ChangePage[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const p of pages) {
    const key = `${p.window.since}-${p.window.until}`;
    out.set(key, (out.get(key) ?? 0) + p.rows.length);
  }
  return out;
}

// Searches are the slow call (a sandbox search filters and sorts the whole type); the sandbox and
// the client agree on a faster search limit than HubSpot's five a second to keep the files short.
const FAST = { searchPerSecond: 40 } as const;

describe("catch-up by modification date", () => {
  it("reads every contact of a window holding more than 10,000 changes, by lastmodifieddate, in windows split under the cap", async () => {
    const s = await sandbox({ seed: 5, contacts: 10_600, companies: 1, deals: 1, engagements: 1, ...FAST });
    const client = clientOf(s, { searchesPerSecond: 40 });
    const pages = await readChanges(client, "contacts", everything);
    const ids = idsOf(pages.flatMap((p) => p.rows));
    expect(ids).toEqual([...s.ids("contacts").live].sort());
    expect(new Set(ids).size).toBe(ids.length);
    const windows = perWindow(pages);
    expect(windows.size).toBeGreaterThan(1);
    for (const count of windows.values()) expect(count).toBeLessThanOrEqual(SEARCH_CAP);
    expect(s.stats().byStatus["400"] ?? 0).toBe(0);
  });

  it("reads every record of a one-millisecond window holding more than 10,000 changes (one bulk edit), by id", async () => {
    const s = await sandbox({
      seed: 6,
      contacts: 10_250,
      companies: 1,
      deals: 1,
      engagements: 1,
      changeEdits: 10_250,
      archivedRate: 0.02,
      ...FAST,
    });
    const { at } = s.applyChanges(Date.UTC(2026, 11, 7, 9, 30));
    const atMs = Date.parse(at);
    const client = clientOf(s, { searchesPerSecond: 40 });
    // A window wider than the edit: it is halved down to the edit's millisecond, which cannot be.
    const pages = await readChanges(client, "contacts", { since: atMs - 1_000, until: atMs + 1_000 });
    const ids = idsOf(pages.flatMap((p) => p.rows));
    expect(ids.length).toBeGreaterThan(SEARCH_CAP);
    expect(ids).toEqual([...s.ids("contacts").live].sort());
    expect(perWindow(pages).get(`${atMs}-${atMs + 1}`)).toBe(ids.length);
    expect(s.stats().byStatus["400"] ?? 0).toBe(0);
  });

  it("finds deals and engagements by hs_lastmodifieddate, only those changed in the window", async () => {
    const s = await sandbox({
      seed: 7,
      contacts: 40,
      companies: 40,
      deals: 300,
      engagements: 200,
      changeEdits: 25,
    });
    const { at } = s.applyChanges(Date.UTC(2026, 11, 7, 9, 0));
    const atMs = Date.parse(at);
    const client = clientOf(s);
    for (const type of ["deals", "notes", "contacts"] as const) {
      const pages = await readChanges(client, type, { since: atMs, until: atMs + 1 });
      const rows = pages.flatMap((p) => p.rows);
      expect(rows.length, type).toBeGreaterThan(15);
      for (const row of rows) {
        if (!("record" in row)) throw row.error;
        expect(row.record.updatedAt).toBe(at);
      }
      // Nothing changed after the window: the next one is empty.
      expect(
        (await readChanges(client, type, { since: atMs + 1, until: atMs + 60_000 })).flatMap((p) => p.rows),
      ).toEqual([]);
    }
  });

  it("resumes a window's walk after the last id read, reading the rest once", async () => {
    const s = await sandbox({ seed: 8, contacts: 700, companies: 1, deals: 1, engagements: 1, ...FAST });
    const client = clientOf(s, { searchesPerSecond: 40 });
    const whole = await readChanges(client, "contacts", everything);
    const [first] = whole;
    if (!first?.lastId) throw new Error("the first page should point on");
    const rest = await readChanges(client, "contacts", everything, {
      window: first.window,
      lastId: first.lastId,
    });
    const ids = idsOf([...first.rows, ...rest.flatMap((p) => p.rows)]);
    expect(ids).toEqual(idsOf(whole.flatMap((p) => p.rows)));
    expect(new Set(ids).size).toBe(ids.length);
  });
});
