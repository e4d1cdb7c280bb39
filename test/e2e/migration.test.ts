import { accountFor, accountingProblems } from "@drover/local-cluster";
import { RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness, watchToEnd } from "../support/cluster-harness.js";

let h: Harness;

beforeAll(async () => {
  h = await openClusterHarness({
    workers: 2,
    laneWidth: 3,
    sandbox: {
      organizations: 200,
      persons: 400,
      deals: 300,
      leads: 100,
      activities: 400,
      notes: 300,
      "mail-per-deal-max": 3,
      "malformed-rate": 0.02,
      "transient-error-rate": 0.005,
    },
    env: { DROVER_SWEEP_INTERVAL_MS: "500" },
  });
});

afterAll(async () => {
  await h?.close();
});

const tenantId = "e2e-tenant";
const start = () =>
  h.client.startRun({
    tenantId,
    source: "crm",
    sourceAccount: "sandbox",
    sourceConfig: {
      baseUrl: h.cluster.sandboxUrl,
      apiToken: "e2e-token",
      settings: { pageSize: "100", stripes: "3" },
    },
  });

async function destinationRows(): Promise<number> {
  const [r] = await h.database.db.execute<{ n: string }>(sql`
    select (select count(*) from app.companies where tenant_id = ${tenantId}) + (select count(*) from app.contacts where tenant_id = ${tenantId})
         + (select count(*) from app.deals where tenant_id = ${tenantId}) + (select count(*) from app.leads where tenant_id = ${tenantId})
         + (select count(*) from app.activities where tenant_id = ${tenantId}) + (select count(*) from app.notes where tenant_id = ${tenantId})
         + (select count(*) from app.emails where tenant_id = ${tenantId}) as n`);
  return Number(r!.n);
}

describe("a migration across separate processes", () => {
  it("accounts for every source row in the ledger or a failure note, and duplicates no destination record", async () => {
    const since = new Date();
    const { run } = await start();
    const last = await watchToEnd(h.client, run!.id);
    expect(last.status).toBe(RunStatus.SUCCEEDED);

    const truth = await h.truth();
    const accounts = await accountFor(
      h.database.db,
      { tenantId, source: "crm", sourceAccount: "sandbox", since },
      truth.kinds,
    );
    expect(accountingProblems(accounts)).toEqual([]);
    // The run's own counters agree with the ledger.
    for (const a of accounts) {
      const p = last.progress.find((x) => x.kind === a.kind)!;
      expect({ kind: a.kind, created: Number(p.imported), failed: Number(p.failed) }).toEqual({
        kind: a.kind,
        created: a.created,
        failed: a.failed,
      });
    }
    expect(accounts.reduce((n, a) => n + a.failed, 0)).toBeGreaterThan(0); // malformed rows were really exercised
  });

  it("a second run for the same tenant finds everything already here and creates nothing", async () => {
    const before = await destinationRows();
    const { run } = await start();
    const last = await watchToEnd(h.client, run!.id);
    expect(last.status).toBe(RunStatus.SUCCEEDED);
    for (const p of last.progress)
      expect({ kind: p.kind, imported: p.imported }).toEqual({ kind: p.kind, imported: 0n });
    expect(last.progress.reduce((n, p) => n + p.alreadyHere + p.matched, 0n)).toBeGreaterThan(0n);
    expect(await destinationRows()).toBe(before);
  });
});
