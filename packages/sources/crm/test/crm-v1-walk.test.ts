import { type Sandbox, startSandbox } from "@drover/crm-sandbox";
import { SourceClient } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { pipedriveAdapter } from "../src/client.js";
import { readWholeList } from "../src/list-walker.js";
import { KIND_LISTS } from "../src/lists.js";
import { drainKinds } from "./crm-drain.js";
import { crmTestAccount, insertCrmRun } from "./crm-run.js";

/**
 * A v1 list (leads, notes) is read no further than it has shown it goes: one walker while it fits
 * in two pages, two once two pages came back full, so where it ends at most one page comes back
 * empty (a page costs 20 tokens whatever it holds). Counted by the sandbox's own stats.
 */
const account = crmTestAccount("v1-walk");
const { token: TOKEN, secrets } = account;
const EMPTY = { organizations: 0, persons: 0, deals: 0, activities: 0, mailPerDealMax: 0, archivedRate: 0 };

async function importOf(sandbox: Sandbox, tenantId: string, kinds: string[]) {
  const runId = await insertCrmRun(account.db, secrets, {
    tenantId,
    sourceAccount: tenantId,
    kinds,
    baseUrl: sandbox.url,
    token: TOKEN,
    settings: { stripes: "4" },
  });
  sandbox.resetStats();
  const tasks = await drainKinds(account.db, secrets, runId, [kinds]);
  expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
  const imported = await account.db.execute<{ kind: string; n: number }>(sql`
    select kind, count(*)::int as n from drover.ledger where tenant_id = ${tenantId} group by kind`);
  return { stats: sandbox.stats(), imported: Object.fromEntries(imported.map((r) => [r.kind, r.n])) };
}

describe("a v1 list walk", () => {
  it("reads one page for a list that fits in one, two for two, and past two pages at most one empty page", async () => {
    const small = await account.sandbox({ ...EMPTY, seed: 5, leads: 150, notes: 700 });
    const run = await importOf(small, "v1-small", ["leads", "notes"]);
    expect(run.stats.byEndpoint["/v1/leads"]?.requests).toBe(1);
    expect(run.stats.byEndpoint["/v1/notes"]?.requests).toBe(2);
    expect(run.imported).toMatchObject({ leads: 150, notes: 700 });

    const long = await account.sandbox({ ...EMPTY, seed: 6, leads: 0, notes: 2_600 });
    const walked = await importOf(long, "v1-long", ["notes"]);
    // Six pages hold 2,600 notes; two walkers past the second page read at most one more.
    expect(walked.stats.byEndpoint["/v1/notes"]?.requests).toBeGreaterThanOrEqual(6);
    expect(walked.stats.byEndpoint["/v1/notes"]?.requests).toBeLessThanOrEqual(7);
    expect(walked.imported).toMatchObject({ notes: 2_600 });
    // It did widen: more than one task walked the notes.
    const [tasks] = await account.db.execute<{ n: number }>(sql`
      select count(*)::int as n from drover.tasks t join drover.runs r on r.id = t.run_id
       where r.tenant_id = 'v1-long' and t.kind = 'notes'`);
    expect(tasks!.n).toBeGreaterThan(1);
  });
});

describe("a whole v1 list read for verification", () => {
  let sandbox: Sandbox | undefined;
  afterAll(() => sandbox?.close());

  it("reads its first two pages one by one and then two at a time, at most one page past the end", async () => {
    sandbox = await startSandbox({ ...EMPTY, port: 0, leads: 0, notes: 1_250 });
    const client = new SourceClient({ baseUrl: sandbox.url, apiToken: "t", adapter: pipedriveAdapter() });
    const notes = KIND_LISTS.notes![0]!;
    for (const [limit, needed] of [
      [500, 3],
      [250, 5],
      [125, 10],
    ] as const) {
      sandbox.resetStats();
      const rows = await readWholeList(client, notes, limit, { pagesAtOnce: 4 });
      expect(rows).toHaveLength(1_250);
      const read = sandbox.stats().byEndpoint["/v1/notes"]!.requests;
      expect(read).toBeGreaterThanOrEqual(needed);
      expect(read).toBeLessThanOrEqual(needed + 1);
    }
  });
});
