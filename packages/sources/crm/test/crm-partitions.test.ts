import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { type Sandbox, startSandbox } from "@drover/crm-sandbox";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { runAssignment, seedContext } from "@drover/engine";
import type { RunInfo } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { partitionRanges } from "../src/partitions.js";
import { crmProvider } from "../src/provider.js";
import { crmProviders as providers } from "./crm-providers.js";
import { insertCrmRun } from "./crm-run.js";

/**
 * A v2 list split into update_time partitions, against the sandbox as a real server and real
 * Postgres: what the split seeds, and that its chains together import each row once.
 */
let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
const sandboxes: Sandbox[] = [];
const TOKEN = "partitions-token";
const secrets = new SecretKeyring(parseSecretKeys(generateSecretKey("partitions")));

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
});

afterAll(async () => {
  await Promise.all(sandboxes.map((s) => s.close()));
  await database?.close();
  await testDb?.drop();
});

async function sandbox(options: Parameters<typeof startSandbox>[0]): Promise<Sandbox> {
  const s = await startSandbox({ port: 0, tokens: [TOKEN], ...options });
  sandboxes.push(s);
  return s;
}

let tenants = 0;

/** A running run of its own tenant that started at `startedAt`. */
async function newRun(s: Sandbox, kinds: string[], startedAt: Date, settings: Record<string, string>) {
  const tenantId = `partitions-${++tenants}`;
  const runId = await insertCrmRun(database.db, secrets, {
    tenantId,
    sourceAccount: `acct-${tenantId}`,
    kinds,
    baseUrl: s.url,
    token: TOKEN,
    settings,
    startedAt,
  });
  return { runId, tenantId };
}

type TaskRow = {
  id: string;
  seed_key: string;
  status: string;
  cursor: Record<string, unknown>;
};

/** Inserts the seeds and runs every task of the run, successors included, until none is pending. */
async function drain(runId: string, seeds: { kind: string; seedKey: string; cursor: unknown }[]) {
  for (const seed of seeds)
    await database.db.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
      values (${runId}::uuid, ${seed.kind}, 0, ${seed.seedKey}, ${JSON.stringify(seed.cursor)}::jsonb)`);
  for (;;) {
    const pending = await database.db.execute<{ id: string }>(
      sql`select id from drover.tasks where run_id = ${runId}::uuid and status = 'pending' order by id`,
    );
    if (pending.length === 0) break;
    for (const t of pending)
      await runAssignment(
        { db: database.db, providers, workerId: "partitions", maxAttempts: 3, notesCap: 100, secrets },
        Number(t.id),
        { shutdown: new AbortController().signal, working: () => {} },
      );
  }
  return database.db.execute<TaskRow>(
    sql`select id, seed_key, status, cursor from drover.tasks where run_id = ${runId}::uuid order by id`,
  );
}

async function ledgerIds(tenantId: string, kind: string): Promise<string[]> {
  const rows = await database.db.execute<{ source_id: string }>(sql`
    select source_id from drover.ledger where tenant_id = ${tenantId} and kind = ${kind} order by source_id::int`);
  return rows.map((r) => r.source_id);
}

async function listIds(s: Sandbox, path: string): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | null = null;
  do {
    const res = await fetch(
      `${s.url}${path}&limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      {
        headers: { "x-api-token": TOKEN },
      },
    );
    const body = (await res.json()) as {
      data: { id: number }[];
      additional_data: { next_cursor: string | null };
    };
    out.push(...body.data.map((r) => String(r.id)));
    cursor = body.additional_data.next_cursor;
  } while (cursor);
  return out;
}

const seedsOf = (run: Partial<RunInfo>, kinds: string[]) =>
  crmProvider.seedPhase(
    seedContext(
      undefined as never,
      { plan: [kinds], kinds, startedAt: new Date(), ...run } as RunInfo,
      0,
      kinds,
    ),
  );

describe("crm partitions setting", () => {
  it("accepts 1..64 and names the setting and its range otherwise", () => {
    const check = (partitions: string) =>
      crmProvider.validateConfig({
        baseUrl: "https://x.pipedrive.com",
        apiToken: "t",
        settings: { partitions },
      });
    expect(check("1")).toBeUndefined();
    expect(check("64")).toBeUndefined();
    for (const bad of ["0", "65", "2.5", "four"])
      expect(check(bad)).toBe(`crm setting partitions must be an integer from 1 to 64, got "${bad}"`);
  });

  it("seeds one split task per normal v2 list, and archived deals, v1 lists (one walker each) and the default as before", async () => {
    const kinds = ["organizations", "deals", "leads"];
    const config = (settings: Record<string, string>) => ({
      sourceConfig: { baseUrl: "http://x", settings },
    });
    const keys = async (settings: Record<string, string>) =>
      (await seedsOf(config(settings), kinds)).map((s) => [s.seedKey, s.cursor.split ?? null]);
    expect(await keys({ partitions: "4", stripes: "2" })).toEqual([
      ["organizations:0:split", 4],
      ["deals:0:split", 4],
      ["deals:1:page:0", null],
      ["leads:0:page:0", null],
      ["leads:1:page:0", null],
    ]);
    expect(await keys({ stripes: "2" })).toEqual([
      ["organizations:0:page:0", null],
      ["deals:0:page:0", null],
      ["deals:1:page:0", null],
      ["leads:0:page:0", null],
      ["leads:1:page:0", null],
    ]);
  });
});

describe("partition ranges", () => {
  it("are adjacent half-open ranges from the oldest update_time's second to the run's start to the millisecond", () => {
    const start = "2026-11-30T12:00:00.457Z";
    const ranges = partitionRanges(Date.parse("2020-03-04T05:06:07.890Z"), start, 5);
    expect(ranges).toHaveLength(5);
    expect(ranges[0]!.since).toBe("2020-03-04T05:06:07.000Z");
    expect(ranges[4]!.until).toBe(start);
    for (let i = 1; i < 5; i++) {
      expect(ranges[i]!.since).toBe(ranges[i - 1]!.until);
      expect(ranges[i]!.since).toMatch(/:\d{2}\.000Z$/);
      expect(Date.parse(ranges[i]!.since)).toBeGreaterThan(Date.parse(ranges[i - 1]!.since));
    }
    // A span shorter than the partitions leaves some ranges empty, never overlapping or out of order.
    const tiny = partitionRanges(Date.parse(start) - 1500, start, 8);
    for (let i = 1; i < 8; i++) expect(tiny[i]!.since).toBe(tiny[i - 1]!.until);
    expect(tiny.every((r) => r.since <= r.until)).toBe(true);
  });
});

describe("a split v2 list", () => {
  it("imports every organization updated before the run started exactly once, a row updated exactly at a bound in the partition it starts", async () => {
    const s = await sandbox({
      seed: 11,
      organizations: 3000,
      persons: 5,
      deals: 5,
      leads: 5,
      activities: 5,
      notes: 5,
      changeEdits: 7,
    });
    // The change set stamps its rows with the instant it applies: a whole second, which a partition
    // bound can be.
    const bound = Math.floor(Date.now() / 1000) * 1000;
    s.applyChanges(bound);
    const edited = s.truth(["organizations"]).kinds.organizations.edited;
    const atBound = await listIds(
      s,
      `/api/v2/organizations?updated_since=${new Date(bound).toISOString()}&updated_until=${new Date(bound + 1).toISOString()}`,
    );
    expect(atBound).toEqual(edited);
    // With two partitions the inner bound is halfway from the oldest row to the start: put it on the edit.
    const [oldest] = (
      (await (
        await fetch(`${s.url}/api/v2/organizations?limit=1&sort_by=update_time`, {
          headers: { "x-api-token": TOKEN },
        })
      ).json()) as { data: { update_time: string }[] }
    ).data;
    const first = Date.parse(oldest!.update_time);
    const startedAt = new Date(first + 2 * (bound - first));
    const settings = { partitions: "2", pageSize: "200" };
    const { runId, tenantId } = await newRun(s, ["organizations"], startedAt, settings);

    const tasks = await drain(
      runId,
      await seedsOf({ sourceConfig: { baseUrl: s.url, settings } }, ["organizations"]),
    );
    expect(tasks.every((t) => t.status === "succeeded")).toBe(true);
    const chains = tasks.filter((t) => t.seed_key.endsWith(":page:0"));
    expect(chains.map((t) => [t.seed_key, t.cursor.partition])).toEqual([
      [
        "organizations:0:part:0of2:page:0",
        { index: 0, of: 2, since: new Date(first).toISOString(), until: new Date(bound).toISOString() },
      ],
      [
        "organizations:0:part:1of2:page:0",
        { index: 1, of: 2, since: new Date(bound).toISOString(), until: startedAt.toISOString() },
      ],
    ]);
    // Each chain walked its own pages, one task going on from page to page with its cursor.
    const pagesWalked = (index: number) =>
      Math.max(
        ...tasks
          .filter((t) => (t.cursor.partition as { index: number } | undefined)?.index === index)
          .map((t) => (t.cursor.page as number) + 1),
      );
    expect(pagesWalked(0) + pagesWalked(1)).toBeGreaterThanOrEqual(3000 / 200);
    // Each range holds its own rows only, the edited ones in the second.
    const [lower, upper] = await Promise.all(
      chains.map((t) => {
        const p = t.cursor.partition as { since: string; until: string };
        return listIds(s, `/api/v2/organizations?updated_since=${p.since}&updated_until=${p.until}`);
      }),
    );
    expect(lower!.filter((id) => edited.includes(id))).toEqual([]);
    expect(edited.every((id) => upper!.includes(id))).toBe(true);
    expect(lower!.filter((id) => upper!.includes(id))).toEqual([]);
    const all = s.truth(["organizations"]).kinds.organizations.ids;
    expect(await ledgerIds(tenantId, "organizations")).toEqual(all);
    expect([...lower!, ...upper!]).toHaveLength(all.length);
  });

  it("of an empty account seeds no chains, and a split run twice seeds no second set", async () => {
    const s = await sandbox({
      seed: 12,
      organizations: 0,
      persons: 300,
      deals: 5,
      leads: 5,
      activities: 5,
      notes: 5,
    });
    const settings = { partitions: "3", pageSize: "50" };
    const empty = await newRun(s, ["organizations"], new Date(), settings);
    const none = await drain(
      empty.runId,
      await seedsOf({ sourceConfig: { baseUrl: s.url, settings } }, ["organizations"]),
    );
    expect(none.map((t) => [t.seed_key, t.status])).toEqual([["organizations:0:split", "succeeded"]]);

    const { runId, tenantId } = await newRun(s, ["persons"], new Date(), settings);
    const split = { list: 0, page: 0, limit: 50, cursor: null, split: 3 };
    const tasks = await drain(runId, [
      { kind: "persons", seedKey: "persons:0:split", cursor: split },
      // The same split again under another key, as a retried or re-seeded one would run.
      { kind: "persons", seedKey: "persons:0:split:again", cursor: split },
    ]);
    const firstPages = tasks.filter((t) => t.seed_key.endsWith(":page:0")).map((t) => t.seed_key);
    expect(firstPages).toEqual([
      "persons:0:part:0of3:page:0",
      "persons:0:part:1of3:page:0",
      "persons:0:part:2of3:page:0",
    ]);
    expect(new Set(tasks.map((t) => t.seed_key)).size).toBe(tasks.length);
    expect(await ledgerIds(tenantId, "persons")).toEqual(s.truth(["persons"]).kinds.persons.ids);
  });
});
