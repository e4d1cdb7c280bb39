import type { Sandbox } from "@drover/crm-sandbox";
import { type Db, openDatabase } from "@drover/db";
import { seedContext, toRunInfo } from "@drover/engine";
import type { WriteSummary } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { crmProvider } from "../src/provider.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * A re-run of a tenant already imported (a new run, same tenant and account, nothing changed at the
 * source): a page asks the ledger once which of its rows it holds and writes nothing for them.
 * It creates nothing, advances none of the product's id sequences, moves over a page held whole
 * with its checkpoint alone, and counts every held row "already here".
 */
let sandbox: Sandbox;
const account = crmTestAccount("rerun");
const { token: TOKEN, secrets } = account;
const tenantId = "rerun";
const PHASES = [
  ["organizations", "persons"],
  ["deals", "leads"],
  ["activities", "notes"],
] as const;
const TABLES = ["companies", "contacts", "deals", "leads", "activities", "notes"];

beforeAll(async () => {
  sandbox = await account.sandbox({
    seed: 5,
    organizations: 120,
    persons: 400,
    deals: 150,
    leads: 60,
    activities: 150,
    notes: 150,
    mailPerDealMax: 0,
  });
});

/** Every phase of an import of the six row kinds, run in process on `db`; the run then succeeds. */
async function importOnce(db: Db): Promise<WriteSummary> {
  const kinds = PHASES.flat();
  const runId = await insertCrmRun(account.db, secrets, {
    tenantId,
    sourceAccount: "rerun",
    kinds,
    baseUrl: sandbox.url,
    token: TOKEN,
    settings: { pageSize: "100", windowSize: "50" },
  });
  const run = toRunInfo((await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!);
  const total: WriteSummary = { attempted: 0, created: 0, matched: 0, alreadyHere: 0, skipped: 0, failed: 0 };
  for (const [phase, phaseKinds] of PHASES.entries()) {
    const seeds = await crmProvider.seedPhase(seedContext(undefined as never, run, phase, phaseKinds));
    const { summary, statuses } = await drainTasks(db, secrets, runId, seeds, phase);
    expect(new Set(statuses)).toEqual(new Set(["succeeded"]));
    for (const k of Object.keys(total) as (keyof WriteSummary)[]) total[k] += summary[k];
  }
  await account.db.execute(sql`update drover.runs set status = 'succeeded' where id = ${runId}::uuid`);
  return total;
}

async function sequences(): Promise<Record<string, number | null>> {
  const out: Record<string, number | null> = {};
  for (const table of TABLES) {
    const [row] = await account.db.execute<{ v: string | null }>(
      sql`select pg_sequence_last_value(${`app.${table}_id_seq`}::regclass)::text as v`,
    );
    out[table] = row!.v === null ? null : Number(row!.v);
  }
  return out;
}

describe("re-running an imported tenant", () => {
  it("creates nothing, burns no id sequence value, passes over pages it holds whole in two statements and counts every row already here", async () => {
    const first = await importOnce(account.db);
    expect(first.created).toBeGreaterThan(1000);
    expect(first.matched).toBeGreaterThan(0);
    const seqBefore = await sequences();
    const ledgerBefore = await account.db.execute<{ n: number }>(
      sql`select count(*)::int as n from drover.ledger where tenant_id = ${tenantId}`,
    );

    // One connection, so each transaction's statements arrive in order between its BEGIN and COMMIT.
    const transactions: string[][] = [];
    let open: string[] | undefined;
    let parentQueries = 0;
    const watched = openDatabase(account.url, {
      max: 1,
      debug: (query) => {
        const q = query.trim().toLowerCase();
        if (q.includes("from unnest(") && q.includes("join drover.ledger l")) parentQueries++;
        if (q === "begin") open = [];
        else if (q === "commit" || q === "rollback") {
          if (open) transactions.push([...open, q]);
          open = undefined;
        } else open?.push(q);
      },
    });
    let again: WriteSummary;
    try {
      again = await importOnce(watched.db);
    } finally {
      await watched.close();
    }

    expect(again).toEqual({
      attempted: first.attempted,
      created: 0,
      matched: 0,
      alreadyHere: first.created + first.matched,
      // A skipped slot is a placeholder, not held: the row is planned again and skipped again.
      skipped: first.skipped,
      failed: first.failed,
    });
    expect(await sequences()).toEqual(seqBefore);
    expect(
      await account.db.execute<{ n: number }>(
        sql`select count(*)::int as n from drover.ledger where tenant_id = ${tenantId}`,
      ),
    ).toEqual(ledgerBefore);

    // A page whose rows the ledger holds whole is passed over: one held-slots query for the page,
    // then a transaction of the deadline settings and the checkpoint alone; its parents are not
    // resolved. Only pages with rows not held (placeholders, skipped before) open windows: each the
    // deadline settings, the held-slots query, for its skipped rows their claim and notes, the
    // checkpoint, the commit. Never a product insert, a savepoint or a rollback.
    const isCheckpoint = (q: string) => q.includes("update drover.tasks t");
    const passed = transactions.filter((t) => t.length === 3 && isCheckpoint(t[1]!));
    const windows = transactions.filter((t) => t.some((q) => q.includes("from drover.ledger l")));
    expect(passed.length).toBeGreaterThan(windows.length);
    expect(windows.length).toBeGreaterThan(0);
    expect(parentQueries).toBeLessThanOrEqual(windows.length);
    for (const t of transactions) expect(t.length).toBeLessThanOrEqual(6);
    const all = transactions.flat();
    expect(all.filter((q) => q.startsWith('insert into "app"') || q.startsWith("insert into app."))).toEqual(
      [],
    );
    expect(all.filter((q) => q.startsWith("savepoint") || q === "rollback")).toEqual([]);
  });
});
