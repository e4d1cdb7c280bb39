import { accountFor, accountingProblems } from "@drover/local-cluster";
import { RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness } from "../support/cluster-harness.js";
import { midRunChangeProblems } from "../support/mid-run-changes.js";

/**
 * v2 lists walked as update_time partitions (`partitions: "4"`) by the services as separate
 * processes, against the sandbox as a separate process, while the customer edits and adds records:
 * the partitions import what was there when the run started, the catch-up pass what changed since.
 */
let h: Harness;
const tenantId = "partitions-e2e";
const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"];
const V2_KINDS = ["organizations", "persons", "deals", "activities"];

beforeAll(async () => {
  h = await openClusterHarness({
    workers: 2,
    laneWidth: 4,
    sandbox: {
      organizations: 900,
      persons: 1200,
      deals: 1000,
      leads: 60,
      activities: 1200,
      notes: 60,
      "mail-per-deal-max": 0,
      "archived-rate": 0.05,
      "deleted-deal-rate": 0.05,
      "change-edits": 12,
      "change-adds": 6,
      // Slow enough that the change set surely lands before the run's last phase.
      "latency-ms": 5,
    },
    env: { DROVER_SWEEP_INTERVAL_MS: "500" },
  });
}, 120_000);

afterAll(async () => {
  await h?.close();
});

interface Truth {
  ids: string[];
  malformed: string[];
  orphans: string[];
  edited: string[];
  added: string[];
}

describe("a run with v2 lists in four update_time partitions", () => {
  it("imports every row of each v2 kind exactly once, and what the customer changed mid-run through the catch-up", async () => {
    const since = new Date();
    const { run } = await h.client.startRun({
      tenantId,
      source: "crm",
      sourceAccount: "partitioned",
      kinds: KINDS,
      sourceConfig: {
        baseUrl: h.cluster.sandboxUrl,
        apiToken: "e2e-token",
        settings: { partitions: "4", pageSize: "100" },
      },
    });
    let changedInPhase: number | undefined;
    let last: Awaited<ReturnType<typeof h.client.getRun>>["run"];
    for await (const update of h.client.watchRun({ runId: run!.id })) {
      last = update.run;
      if (changedInPhase === undefined && (last?.currentPhase ?? 0) >= 1) {
        changedInPhase = last!.currentPhase;
        const res = await fetch(`${h.cluster.sandboxUrl}/__sandbox/changes`, { method: "POST" });
        expect(((await res.json()) as { applied: boolean }).applied).toBe(true);
      }
    }
    expect(last?.status).toBe(RunStatus.SUCCEEDED);
    const catchUpPhase = last!.phases.findIndex((p) => p.kinds.includes("catch-up"));
    expect(changedInPhase).toBeDefined();
    expect(changedInPhase!).toBeLessThan(catchUpPhase);

    // Each normal v2 list was split once into four chains; archived deals stayed one chain.
    const firstPages = await h.database.db.execute<{ seed_key: string }>(sql`
      select seed_key from drover.tasks where run_id = ${run!.id}::uuid
         and (seed_key like '%:split' or seed_key like '%:page:0') and seed_key not like 'catch-up:%'
       order by seed_key`);
    const keys = firstPages.map((t) => t.seed_key);
    for (const [kind, list] of [
      ["organizations", 0],
      ["persons", 0],
      ["deals", 0],
      ["activities", 0],
    ] as const) {
      expect(keys).toContain(`${kind}:${list}:split`);
      for (let p = 0; p < 4; p++) expect(keys).toContain(`${kind}:${list}:part:${p}of4:page:0`);
      expect(keys).not.toContain(`${kind}:${list}:page:0`);
    }
    expect(keys).toContain("deals:1:page:0");

    const truth = (await (await fetch(`${h.cluster.sandboxUrl}/__sandbox/truth`)).json()) as {
      kinds: Record<string, Truth>;
    };
    const inRun = Object.fromEntries(KINDS.map((k) => [k, truth.kinds[k]!]));
    const accounts = await accountFor(
      h.database.db,
      { tenantId, source: "crm", sourceAccount: "partitioned", since },
      inRun,
    );
    // Nothing lost, nothing the source does not have, no destination record made twice.
    expect(accountingProblems(accounts)).toEqual([]);

    for (const kind of V2_KINDS) {
      const t = truth.kinds[kind]!;
      const [ledger] = await h.database.db.execute<{ rows: string; ids: string }>(sql`
        select count(*) as rows, count(distinct source_id) as ids from drover.ledger
         where tenant_id = ${tenantId} and source = 'crm' and source_account = 'partitioned' and kind = ${kind}`);
      const failed = accounts.find((a) => a.kind === kind)!.failed;
      expect({ kind, ledger: Number(ledger!.rows) + failed, distinct: Number(ledger!.ids) }).toEqual({
        kind,
        ledger: t.ids.length,
        distinct: Number(ledger!.rows),
      });
      expect(t.edited.length).toBeGreaterThan(0);
      expect(t.added.length).toBeGreaterThan(0);
      // Only the catch-up meets a row a second time (one edited after its partition imported it):
      // overlapping partitions would show here as rows already here.
      const progress = last!.progress.find((p) => p.kind === kind)!;
      expect(Number(progress.alreadyHere), `${kind} rows already here`).toBeLessThanOrEqual(t.edited.length);
    }

    // What was edited mid-run carries the edit on the record the ledger points to; additions were imported.
    expect(
      await midRunChangeProblems(
        h.database.db,
        { tenantId, sourceAccount: "partitioned" },
        truth.kinds,
        KINDS,
      ),
    ).toEqual([]);
  });
});
