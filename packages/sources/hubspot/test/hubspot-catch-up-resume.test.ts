import type { SeedContext } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { CATCH_UP, type CatchUpCursor, hubspotProvider, INDEXING_MARGIN_MS } from "../src/index.js";
import { sandbox } from "./helpers.js";
import { drainSeeds, hubspotTestAccount, insertHubSpotRun } from "./hubspot-run.js";

/**
 * The catch-up task resumes where its checkpoint says: inside a window after the last id it wrote,
 * or past a window it finished, and hands over to the chain's next type either way.
 */
const account = hubspotTestAccount("hubspot-catch-up-resume");
let url = "";
let changed: string[] = [];
const until = Date.now() - 6_000;
const window = { since: until - 60_000, until };

beforeAll(async () => {
  const s = await sandbox({
    companies: 20,
    contacts: 0,
    deals: 0,
    engagements: 0,
    changeEdits: 5,
    changeAdds: 3,
  });
  url = s.url;
  // A round of changes inside the window: five companies edited, three added.
  s.applyChanges(until - 10_000);
});

async function ledgerIds(tenantId: string): Promise<string[]> {
  const rows = await account.db.execute<{ source_id: string }>(sql`
    select source_id from drover.ledger where tenant_id = ${tenantId} and kind = 'companies' order by source_id`);
  return rows.map((r) => r.source_id);
}

async function catchUpFrom(tenantId: string, from?: CatchUpCursor["from"]) {
  const runId = await insertHubSpotRun(account.db, account.secrets, {
    tenantId,
    sourceAccount: "hs",
    baseUrl: url,
  });
  const cursor: CatchUpCursor = { ...window, chain: ["contacts"], ...(from ? { from } : {}) };
  await drainSeeds(
    account.db,
    account.secrets,
    runId,
    [{ kind: "companies", seedKey: `${CATCH_UP}:companies`, cursor: { ...cursor } }],
    4,
  );
  return account.db.execute<{ kind: string; seed_key: string; status: string }>(sql`
    select kind, seed_key, status from drover.tasks where run_id = ${runId}::uuid order by id`);
}

describe("the hubspot catch-up", () => {
  it("writes what changed in its window, then hands over to the next type of its chain", async () => {
    const tasks = await catchUpFrom("whole");
    expect(tasks.map((t) => [t.kind, t.seed_key, t.status])).toEqual([
      ["companies", "catch-up:companies", "succeeded"],
      ["contacts", "catch-up:contacts", "succeeded"],
    ]);
    const written = await ledgerIds("whole");
    expect(written.length).toBe(8);
    changed = written;
  });

  it("resumes inside a window after the last id its checkpoint names", async () => {
    await catchUpFrom("inside", { window, lastId: changed[3]! });
    expect(await ledgerIds("inside")).toEqual(changed.slice(4));
  });

  it("resumes past a window it had finished, writing nothing of it again", async () => {
    const tasks = await catchUpFrom("past", { window, lastId: "99999999999999999999" });
    expect(await ledgerIds("past")).toEqual([]);
    expect(tasks.map((t) => t.status)).toEqual(["succeeded", "succeeded"]);
  });
  it("of a follow pass takes its window's end when it runs, not when seeded, and hands it down the chain", async () => {
    const runId = await insertHubSpotRun(account.db, account.secrets, {
      tenantId: "follow",
      sourceAccount: "hs",
      baseUrl: url,
    });
    const run = { id: runId, plan: hubspotProvider.phases.map((p) => [...p]), startedAt: new Date() };
    const [seed] = await hubspotProvider.seedPhase({
      run,
      kinds: [CATCH_UP],
      phase: 4,
      pass: { index: 2, since: new Date(window.since + 1_000).toISOString() },
    } as unknown as SeedContext);
    expect(seed).toMatchObject({ kind: "companies", seedKey: "follow2:catch-up:companies" });
    expect(seed!.cursor.until).toBeUndefined();
    // Due at once here: its window ends now, and the task waits out the search's indexing lag.
    const before = Date.now();
    await drainSeeds(account.db, account.secrets, runId, [seed!], 4);
    const [next] = await account.db.execute<{ cursor: CatchUpCursor }>(sql`
      select cursor from drover.tasks where run_id = ${runId}::uuid and kind = 'contacts'`);
    expect(next!.cursor.until).toBeGreaterThanOrEqual(before);
    expect(next!.cursor.since).toBe(window.since);
    expect((await ledgerIds("follow")).length).toBe(8);
  });

  it("of the import searches up to the indexing margin at once, then walks every type again over the margin once it has passed", async () => {
    const runId = await insertHubSpotRun(account.db, account.secrets, {
      tenantId: "rounds",
      sourceAccount: "hs",
      baseUrl: url,
    });
    // A run that started before the round of changes: the first round's window holds all of them.
    const run = {
      id: runId,
      plan: hubspotProvider.phases.map((p) => [...p]),
      startedAt: new Date(window.since + 1_000),
    };
    const seededAt = Date.now();
    const [seed] = await hubspotProvider.seedPhase({
      run,
      kinds: [CATCH_UP],
      phase: 2,
    } as unknown as SeedContext);
    const first = seed!.cursor as unknown as CatchUpCursor;
    expect(first.since).toBe(window.since);
    expect(seededAt - INDEXING_MARGIN_MS - first.until!).toBeLessThanOrEqual(0);
    expect(first.settleUntil! - first.until!).toBe(INDEXING_MARGIN_MS);
    await drainSeeds(account.db, account.secrets, runId, [seed!], 40);
    const tasks = await account.db.execute<{ seed_key: string; status: string; cursor: CatchUpCursor }>(sql`
      select seed_key, status, cursor from drover.tasks where run_id = ${runId}::uuid order by id`);
    const types = hubspotProvider.phases.flat().filter((k) => k !== CATCH_UP);
    expect(tasks.map((t) => t.seed_key)).toEqual([
      ...types.map((t) => `catch-up:${t}`),
      ...types.map((t) => `catch-up:settle:${t}`),
    ]);
    expect(tasks.every((t) => t.status === "succeeded")).toBe(true);
    // The second round starts where the first ended: no change falls between them.
    const settle = tasks.find((t) => t.seed_key === "catch-up:settle:companies")!.cursor;
    expect(settle.since).toBe(first.until);
    expect(settle.until).toBe(first.settleUntil);
    expect(await ledgerIds("rounds")).toEqual(changed);
  });
});
