import { accountFor, accountingProblems } from "@drover/local-cluster";
import { RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness } from "../support/cluster-harness.js";
import { CHANGED_COLUMN, midRunChangeProblems } from "../support/mid-run-changes.js";

/**
 * A Pipedrive account as it is in 2026, served by the sandbox as a separate process: deals from v2
 * cursor lists with archived and recently deleted ones, UUID leads with archived ones, notes and
 * activities hanging off several parents (leads among them), and a customer who edits and adds
 * records while the run is going. The run must put every one of them where it belongs.
 */
let h: Harness;
const tenantId = "pipedrive-e2e";

interface Truth {
  ids: string[];
  malformed: string[];
  edited: string[];
  added: string[];
  archived?: string[];
  deleted?: string[];
  multiParent?: string[];
  leadAttached?: string[];
}

beforeAll(async () => {
  h = await openClusterHarness({
    workers: 2,
    laneWidth: 3,
    sandbox: {
      organizations: 150,
      persons: 300,
      deals: 260,
      leads: 120,
      activities: 300,
      notes: 260,
      "mail-per-deal-max": 2,
      "malformed-rate": 0.01,
      "archived-rate": 0.08,
      "deleted-deal-rate": 0.06,
      "change-edits": 5,
      "change-adds": 4,
      // Slow enough that the change set surely lands before the run's last phase.
      "latency-ms": 15,
    },
    env: { DROVER_SWEEP_INTERVAL_MS: "500" },
  });
}, 120_000);

afterAll(async () => {
  await h?.close();
});

async function ledger(kind: string): Promise<Map<string, { action: string; recordId: number | null }>> {
  const rows = await h.database.db.execute<{
    source_id: string;
    action: string;
    record_id: string | null;
  }>(sql`
    select source_id, action, record_id::text as record_id from drover.ledger
     where tenant_id = ${tenantId} and source = 'crm' and source_account = 'pipedrive' and kind = ${kind}`);
  return new Map(
    rows.map((r) => [
      r.source_id,
      { action: r.action, recordId: r.record_id === null ? null : Number(r.record_id) },
    ]),
  );
}

async function records(table: string, columns: string): Promise<Map<number, Record<string, unknown>>> {
  const rows = await h.database.db.execute<Record<string, unknown>>(
    sql`select id, ${sql.raw(columns)} from ${sql.identifier("app")}.${sql.identifier(table)} where tenant_id = ${tenantId}`,
  );
  return new Map(rows.map((r) => [Number(r.id), r]));
}

async function sourceRows(path: string, cursor: boolean): Promise<Map<string, Record<string, unknown>>> {
  const out = new Map<string, Record<string, unknown>>();
  let start = 0;
  let next: string | null = null;
  for (;;) {
    const query = cursor ? (next ? `&cursor=${encodeURIComponent(next)}` : "") : `&start=${start}`;
    const res = await fetch(`${h.cluster.sandboxUrl}${path}?limit=500${query}`, {
      headers: { "x-api-token": "e2e-token" },
    });
    const body = (await res.json()) as {
      data: Record<string, unknown>[] | null;
      additional_data?: { next_cursor?: string | null; pagination?: { more_items_in_collection: boolean } };
    };
    for (const r of body.data ?? []) out.set(String(r.id), r);
    if (cursor) {
      next = body.additional_data?.next_cursor ?? null;
      if (!next) return out;
    } else {
      if (!body.additional_data?.pagination?.more_items_in_collection) return out;
      start += 500;
    }
  }
}

describe("importing a 2026 Pipedrive account", () => {
  it("puts archived, deleted, multi-parent and lead-attached records where they belong, and catches up mid-run changes", async () => {
    const since = new Date();
    const { run } = await h.client.startRun({
      tenantId,
      source: "crm",
      sourceAccount: "pipedrive",
      sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: "e2e-token", settings: { pageSize: "100" } },
    });
    // The customer edits and adds records once the run is past its first phase.
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

    const truth = (await (await fetch(`${h.cluster.sandboxUrl}/__sandbox/truth`)).json()) as {
      kinds: Record<string, Truth>;
    };
    // Nothing lost, nothing unexpected, nothing duplicated: the additions included.
    const accounts = await accountFor(
      h.database.db,
      { tenantId, source: "crm", sourceAccount: "pipedrive", since },
      truth.kinds,
    );
    expect(accountingProblems(accounts)).toEqual([]);
    // GetRun shows each source row once, in its final outcome, though the catch-up met the edited
    // ones (and the mail of changed deals) a second time.
    const done = (await h.client.getRun({ runId: run!.id })).run!;
    for (const p of done.progress.filter((x) => truth.kinds[x.kind])) {
      const shown = p.imported + p.matched + p.alreadyHere + p.skipped + p.failed;
      expect({ kind: p.kind, rows: Number(shown) }).toEqual({
        kind: p.kind,
        rows: truth.kinds[p.kind]!.ids.length,
      });
    }

    const deals = truth.kinds.deals!;
    const dealLedger = await ledger("deals");
    const dealRecords = await records("deals", "status, archived");
    expect(deals.deleted!.length).toBeGreaterThan(0);
    expect(deals.archived!.length).toBeGreaterThan(0);
    for (const id of deals.deleted!.filter((d) => !deals.malformed.includes(d))) {
      const rec = dealRecords.get(dealLedger.get(id)!.recordId!)!;
      expect({ id, status: rec.status }).toEqual({ id, status: "deleted" });
    }
    for (const id of deals.archived!.filter((d) => !deals.malformed.includes(d))) {
      const rec = dealRecords.get(dealLedger.get(id)!.recordId!)!;
      expect({ id, archived: rec.archived }).toEqual({ id, archived: true });
    }
    const leads = truth.kinds.leads!;
    const leadLedger = await ledger("leads");
    const leadRecords = await records("leads", "archived");
    expect(leads.archived!.length).toBeGreaterThan(0);
    for (const id of leads.archived!.filter((d) => !leads.malformed.includes(d))) {
      const rec = leadRecords.get(leadLedger.get(id)!.recordId!)!;
      expect({ id, archived: rec.archived }).toEqual({ id, archived: true });
    }

    // Notes and activities link to every parent the ledger knows, leads included.
    const parentLedgers = {
      deals: dealLedger,
      persons: await ledger("persons"),
      organizations: await ledger("organizations"),
      leads: leadLedger,
    };
    const linkOf = (kind: keyof typeof parentLedgers, ref: unknown) => {
      if (ref === null || ref === undefined) return null;
      const entry = parentLedgers[kind].get(String(ref));
      return entry && entry.action !== "skipped" ? entry.recordId : null;
    };
    for (const [kind, path, cursor] of [
      ["notes", "/v1/notes", false],
      ["activities", "/api/v2/activities", true],
    ] as const) {
      const t = truth.kinds[kind]!;
      const source = await sourceRows(path, cursor);
      const own = await ledger(kind);
      const recs = await records(CHANGED_COLUMN[kind]!.table, "deal_id, contact_id, company_id, lead_id");
      const checked = [...new Set([...t.multiParent!, ...t.leadAttached!])].filter(
        (id) => !t.malformed.includes(id),
      );
      expect(t.multiParent!.length).toBeGreaterThan(0);
      expect(t.leadAttached!.length).toBeGreaterThan(0);
      for (const id of checked) {
        const row = source.get(id)!;
        const entry = own.get(id)!;
        const want = {
          deal_id: linkOf("deals", row.deal_id),
          contact_id: linkOf("persons", row.person_id),
          company_id: linkOf("organizations", row.org_id),
          lead_id: linkOf("leads", row.lead_id),
        };
        expect({ kind, id, action: entry.action }).toEqual({ kind, id, action: "created" });
        const rec = recs.get(entry.recordId!)!;
        const have = Object.fromEntries(
          Object.keys(want).map((k) => [k, rec[k] === null ? null : Number(rec[k])]),
        );
        expect({ kind, id, links: have }).toEqual({ kind, id, links: want });
      }
    }

    // What the customer changed mid-run is on the record the ledger points to; what they added was imported once.
    const changed = Object.keys(CHANGED_COLUMN);
    for (const kind of changed) expect(truth.kinds[kind]!.edited.length, kind).toBeGreaterThan(0);
    expect(
      await midRunChangeProblems(
        h.database.db,
        { tenantId, sourceAccount: "pipedrive" },
        truth.kinds,
        changed,
      ),
    ).toEqual([]);
  });
});
