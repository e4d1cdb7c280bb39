import type { Truth } from "@drover/crm-sandbox";
import { RunStatus } from "@drover/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, untilFinished } from "../support/in-process.js";

/** The destination table each crm kind writes to. */
const TABLES: Record<string, string> = {
  organizations: "companies",
  persons: "contacts",
  deals: "deals",
  leads: "leads",
  activities: "activities",
  notes: "notes",
  mail: "emails",
};
const KINDS = Object.keys(TABLES);
const NOT_LINKED = "not linked to any record";
const TENANT = "acme";

let c: Cluster;
let truth: Truth;
beforeAll(async () => {
  c = await startCluster({ workers: 2, laneWidth: 2, sandbox: { malformedRate: 0.03 } });
  truth = c.sandbox.truth();
});
afterAll(async () => {
  await c?.close();
});

async function ledger(kind: string): Promise<Map<string, { action: string; reason: string | null }>> {
  const rows = await c.database.sql<{ source_id: string; action: string; reason: string | null }[]>`
    select source_id, action, reason from drover.ledger
     where tenant_id = ${TENANT} and source = 'crm' and source_account = 'acct' and kind = ${kind}`;
  return new Map(rows.map((r) => [r.source_id, { action: r.action, reason: r.reason }]));
}

async function errorNotes(runId: string, kind: string): Promise<Set<string>> {
  const rows = await c.database.sql<{ subject_id: string }[]>`
    select distinct subject_id from drover.notes
     where run_id = ${runId}::uuid and kind = ${kind} and level = 'error' and subject_id is not null`;
  return new Set(rows.map((r) => r.subject_id));
}

async function destinationCounts(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [kind, table] of Object.entries(TABLES)) {
    const [row] = await c.database.sql<{ n: number }[]>`
      select count(*)::int as n from ${c.database.sql(`app.${table}`)} where tenant_id = ${TENANT}`;
    out[kind] = row!.n;
  }
  return out;
}

describe("a whole migration with two workers", { timeout: 60_000 }, () => {
  let firstRunId = "";
  let firstCounts: Record<string, number> = {};

  it("succeeds and accounts for every source row: imported once, skipped with a reason, or failed with a note", async () => {
    const started = await c.start(TENANT);
    firstRunId = started.id;
    const run = await untilFinished(c, started.id, 50_000);
    expect(run.status, run.error).toBe(RunStatus.SUCCEEDED);
    // Both workers took part.
    for (const w of c.workers) expect(c.outcomesOf(w).some((o) => o.status === "succeeded")).toBe(true);

    firstCounts = await destinationCounts();
    for (const kind of KINDS) {
      const t = truth.kinds[kind as keyof Truth["kinds"]];
      expect(t.count, kind).toBeGreaterThan(0);
      const inLedger = await ledger(kind);
      const failed = await errorNotes(run.id, kind);

      // Nothing lost.
      const lost = t.ids.filter((id) => !inLedger.has(id) && !failed.has(id));
      expect(lost, `${kind}: source rows neither in the ledger nor failed`).toEqual([]);
      // Nothing invented.
      const source = new Set(t.ids);
      expect(
        [...inLedger.keys()].filter((id) => !source.has(id)),
        `${kind}: ledger rows the source lacks`,
      ).toEqual([]);
      // No duplicates: one destination record per created ledger row.
      const created = [...inLedger.values()].filter((e) => e.action === "created").length;
      expect(firstCounts[kind], `${kind}: destination rows vs created ledger rows`).toBe(created);
      // Every malformed row failed, with a note, and has no ledger row.
      for (const id of t.malformed) {
        expect(failed.has(id), `${kind} ${id} is malformed but has no error note`).toBe(true);
        expect(inLedger.has(id), `${kind} ${id} is malformed but is in the ledger`).toBe(false);
      }
      // Orphans are placeholders, with the reason.
      for (const id of t.orphans) {
        if (t.malformed.includes(id)) continue;
        expect(inLedger.get(id), `${kind} orphan ${id}`).toEqual({ action: "skipped", reason: NOT_LINKED });
      }
      // The run's own progress agrees with the ledger.
      const progress = run.progress.find((p) => p.kind === kind)!;
      expect(Number(progress.imported), `${kind}: imported`).toBe(created);
      expect(Number(progress.failed), `${kind}: failed`).toBe(failed.size);
    }
    // The fixture exercises what it should.
    expect(truth.kinds.persons.malformed.length + truth.kinds.deals.malformed.length).toBeGreaterThan(0);
    expect(truth.kinds.notes.orphans.length + truth.kinds.activities.orphans.length).toBeGreaterThan(0);
  });

  it("a second run for the same tenant finds every row already here and creates nothing", async () => {
    expect(firstRunId).not.toBe("");
    const started = await c.start(TENANT);
    expect(started.id).not.toBe(firstRunId);
    const run = await untilFinished(c, started.id, 50_000);
    expect(run.status, run.error).toBe(RunStatus.SUCCEEDED);

    for (const kind of KINDS) {
      const t = truth.kinds[kind as keyof Truth["kinds"]];
      const inLedger = await ledger(kind);
      const owned = [...inLedger.values()].filter(
        (e) => e.action === "created" || e.action === "matched",
      ).length;
      const p = run.progress.find((x) => x.kind === kind)!;
      expect(p.imported, `${kind}: imported`).toBe(0n);
      expect(p.matched, `${kind}: matched`).toBe(0n);
      expect(Number(p.alreadyHere), `${kind}: already here`).toBe(owned);
      expect(Number(p.alreadyHere + p.skipped + p.failed), `${kind}: rows seen`).toBe(t.count);
    }
    expect(await destinationCounts()).toEqual(firstCounts);
  });
});
