import type { Sandbox } from "@drover/crm-sandbox";
import { seedContext, toRunInfo } from "@drover/engine";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { CATCH_UP } from "../src/lists.js";
import { passCut } from "../src/partitions.js";
import { crmProvider } from "../src/provider.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * Where a pass cuts in time, at the boundary: Pipedrive stores update times in whole seconds, so a
 * row changed in the second the run started, after its list was read, shows a time before the
 * run's start. The import's catch-up must still ask for it, on every kind of list: a v2 list the
 * source filters (persons), a v1 list the source filters (notes, live leads) and the v1 list Drover
 * filters on its side (archived leads, which take no updated_since).
 */
let sandbox: Sandbox;
const account = crmTestAccount("pass-cut");
const { token: TOKEN, secrets } = account;

beforeAll(async () => {
  sandbox = await account.sandbox({
    seed: 5,
    organizations: 0,
    persons: 40,
    deals: 0,
    leads: 60,
    activities: 0,
    notes: 40,
    mailPerDealMax: 0,
    archivedRate: 0.3,
  });
});

interface Listed {
  id: string;
  at: number;
}

/** Every row of a list: its id and update time in ms (v1 says "YYYY-MM-DD HH:MM:SS", UTC). */
async function listed(path: string): Promise<Listed[]> {
  const res = await fetch(`${sandbox.url}${path}?limit=500`, { headers: { "x-api-token": TOKEN } });
  const body = (await res.json()) as { data: { id: string | number; update_time: string }[] | null };
  return (body.data ?? []).map((r) => ({
    id: String(r.id),
    at: Date.parse(
      /[TZ]/.test(r.update_time.slice(10)) ? r.update_time : `${r.update_time.replace(" ", "T")}Z`,
    ),
  }));
}

/**
 * A run of `kind` started late in the second of `anchor` (an update time of the kind), its
 * catch-up drained: the rows it wrote, and those of `rows` changed in that second or later.
 */
async function catchUpAfter(
  kind: string,
  rows: readonly Listed[],
  anchor: number,
  name: string,
): Promise<{ expected: string[]; got: string[] }> {
  // Late in the second: leads keep milliseconds (whole-second kinds show .000), so the row in it
  // changed before the start only by the source's rounding.
  const startedAt = new Date(Math.floor(anchor / 1000) * 1000 + 999);
  const tenantId = `pass-cut-${name}`;
  const runId = await insertCrmRun(account.db, secrets, {
    tenantId,
    sourceAccount: tenantId,
    kinds: [kind],
    baseUrl: sandbox.url,
    token: TOKEN,
    settings: { pageSize: "100" },
    startedAt,
  });
  const run = toRunInfo((await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!);
  const seeds = await crmProvider.seedPhase(seedContext(undefined as never, run, 1, [CATCH_UP]));
  expect(seeds.map((s) => (s.cursor as { since?: string }).since)).toEqual([passCut(startedAt)]);
  const { statuses } = await drainTasks(account.db, secrets, runId, seeds, 1);
  expect(statuses.every((s) => s === "succeeded")).toBe(true);
  const ledger = await account.db.execute<{ source_id: string }>(
    sql`select source_id from drover.ledger where run_id = ${runId}::uuid`,
  );
  const second = Math.floor(anchor / 1000) * 1000;
  return {
    expected: rows
      .filter((r) => r.at >= second)
      .map((r) => r.id)
      .sort(),
    got: ledger.map((r) => r.source_id).sort(),
  };
}

describe("where a pass cuts in time", () => {
  it("the import's catch-up reads a row changed in the second the run started, on every kind of list", async () => {
    for (const [kind, path] of [
      ["persons", "/api/v2/persons"],
      ["notes", "/v1/notes"],
    ] as const) {
      const rows = await listed(path);
      const anchor = Math.max(...rows.map((r) => r.at));
      const { expected, got } = await catchUpAfter(kind, rows, anchor, kind);
      expect(expected.length, kind).toBeGreaterThan(0);
      expect(got, kind).toEqual(expected);
    }
    // Leads: the live list filtered by the source, the archived one walked whole and filtered on
    // Drover's side; anchored once on each list's latest update.
    const live = await listed("/v1/leads");
    const archived = await listed("/v1/leads/archived");
    expect(archived.length).toBeGreaterThan(0);
    for (const [name, list] of [
      ["live-leads", live],
      ["archived-leads", archived],
    ] as const) {
      const anchor = Math.max(...list.map((r) => r.at));
      const { expected, got } = await catchUpAfter("leads", [...live, ...archived], anchor, name);
      expect(expected, name).toEqual(
        expect.arrayContaining(list.filter((r) => r.at === anchor).map((r) => r.id)),
      );
      expect(got, name).toEqual(expected);
    }
  });
});
