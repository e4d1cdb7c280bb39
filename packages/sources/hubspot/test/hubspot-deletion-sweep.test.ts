import type { HubSpotSandbox } from "@drover/hubspot-sandbox";
import { PRODUCT_RECORDS } from "@drover/product-records";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { sweepSeed } from "../src/deletion-sweep.js";
import { OBJECT_TYPES } from "../src/object-types.js";
import { sandbox } from "./helpers.js";
import { drainPhases, drainSeeds, hubspotTestAccount, insertHubSpotRun } from "./hubspot-run.js";

/**
 * A follow pass's deletion sweep, through the engine in process against the sandbox: HubSpot's
 * delete (an archive) leaves search and does not move the modification time, so only the sweep
 * finds it, and it spends requests only where the counts say something changed.
 */
const account = hubspotTestAccount("hubspot-deletion-sweep");
const TENANT = "hs-sweep";
let s: HubSpotSandbox;
let runId = "";
let pass = 0;

beforeAll(async () => {
  s = await sandbox({ companies: 30, contacts: 40, deals: 30, engagements: 12, archivedRate: 0.1 });
  runId = await insertHubSpotRun(account.db, account.secrets, {
    tenantId: TENANT,
    sourceAccount: "hs",
    baseUrl: s.url,
  });
  // The lists: every live and archived record held, the archived ones written deleted.
  await drainPhases(account.db, account.secrets, runId, 0, 1);
});

/** A sweep pass over every type, and what it asked the source, by call. */
async function sweep(): Promise<Record<string, number>> {
  pass++;
  const before = s.stats().admittedByCall;
  await drainSeeds(account.db, account.secrets, runId, sweepSeed([...OBJECT_TYPES], pass), 2);
  const after = s.stats().admittedByCall;
  return Object.fromEntries(
    Object.entries(after)
      .map(([call, n]) => [call, n - (before[call] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
}

async function goneAtSource(type: string): Promise<Set<string>> {
  const rows = await account.db.execute<{ source_id: string }>(sql`
    select source_id from drover.ledger
     where tenant_id = ${TENANT} and kind = ${type} and source_deleted_at is not null`);
  return new Set(rows.map((r) => r.source_id));
}

/** Whether Drover's record of each of these source rows is marked deleted. */
async function recordsDeleted(type: string, ids: readonly string[]): Promise<boolean[]> {
  const slots = await account.db.execute<{ record_type: string; record_id: string }>(sql`
    select record_type, record_id::text from drover.ledger
     where tenant_id = ${TENANT} and kind = ${type} and action = 'created' and source_id in ${sql`(${sql.join(
       ids.map((id) => sql`${id}`),
       sql`, `,
     )})`}`);
  const out: boolean[] = [];
  for (const slot of slots) {
    const [row] = await account.db.execute<{ deleted: boolean }>(sql`
      select deleted_at is not null as deleted from ${sql.raw(PRODUCT_RECORDS.tables[slot.record_type]!)}
       where id = ${slot.record_id}::bigint`);
    out.push(row!.deleted);
  }
  return out;
}

describe("a follow pass's deletion sweep", () => {
  it("marks what the source holds archived, and nothing live", async () => {
    await sweep();
    for (const type of OBJECT_TYPES) {
      const truth = s.ids(type);
      expect([...(await goneAtSource(type))].sort(), type).toEqual([...truth.archived].sort());
    }
  });

  it("costs one search a type when nothing was deleted since", async () => {
    expect(await sweep()).toEqual({ search: OBJECT_TYPES.length });
  });

  it("finds the records archived since, marks Drover's records of them deleted, and reads only the archived lists", async () => {
    const before = new Map(OBJECT_TYPES.map((t) => [t, new Set(s.ids(t).archived)]));
    s.applyChanges(undefined, { archives: 2 });
    const cost = await sweep();
    let archivedPages = 0;
    for (const type of OBJECT_TYPES) {
      const truth = s.ids(type);
      const newly = truth.archived.filter((id) => !before.get(type)!.has(id));
      expect(newly.length, type).toBe(2);
      expect([...(await goneAtSource(type))].sort(), type).toEqual([...truth.archived].sort());
      expect(await recordsDeleted(type, newly), type).toEqual([true, true]);
      archivedPages += Math.max(1, Math.ceil(truth.archived.length / 100));
    }
    // A search a type, then each type's archived list: no live list, no read by id.
    expect(cost).toEqual({ search: OBJECT_TYPES.length, list: archivedPages });
  });

  it("finds a record restored at the source, unmarks it and its record, and reads by id only the rows it held deleted", async () => {
    const before = new Map(OBJECT_TYPES.map((t) => [t, new Set(s.ids(t).archived)]));
    s.applyChanges(undefined, { restores: 1 });
    const cost = await sweep();
    for (const type of OBJECT_TYPES) {
      const truth = s.ids(type);
      const restored = [...before.get(type)!].filter((id) => truth.live.includes(id));
      expect(restored.length, type).toBe(1);
      expect([...(await goneAtSource(type))].sort(), type).toEqual([...truth.archived].sort());
      expect(await recordsDeleted(type, restored), type).toEqual([false]);
    }
    // A search a type, then one batch read of the held deleted rows (fewer than 100 a type).
    expect(cost).toEqual({ search: OBJECT_TYPES.length, "batch-read": OBJECT_TYPES.length });
  });
});
