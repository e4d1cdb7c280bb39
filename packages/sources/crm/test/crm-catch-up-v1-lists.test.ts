import type { Sandbox } from "@drover/crm-sandbox";
import { seedContext, toRunInfo } from "@drover/engine";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { CATCH_UP } from "../src/lists.js";
import { crmProvider } from "../src/provider.js";
import { crmTestAccount, drainTasks, insertCrmRun } from "./crm-run.js";

/**
 * The catch-up on the v1 lists: /v1/leads and /v1/notes take `updated_since` (Pipedrive's
 * reference), so the catch-up asks them for what changed instead of walking them whole; the
 * archived leads list does not, and is still walked whole. Counted by the sandbox's request stats.
 */
let sandbox: Sandbox;
const account = crmTestAccount("v1-catch-up");
const { token: TOKEN, secrets } = account;
const tenantId = "v1-catch-up";
const KINDS = ["leads", "notes"] as const;
const PAGE = 50;

beforeAll(async () => {
  sandbox = await account.sandbox({
    seed: 11,
    organizations: 0,
    persons: 0,
    deals: 0,
    leads: 400,
    activities: 0,
    notes: 400,
    mailPerDealMax: 0,
    changeEdits: 6,
    changeAdds: 2,
  });
});

async function pagesOf(path: string): Promise<number> {
  let pages = 0;
  for (let start = 0; ; start += PAGE) {
    pages++;
    const res = await fetch(`${sandbox.url}${path}?start=${start}&limit=${PAGE}`, {
      headers: { "x-api-token": TOKEN },
    });
    const body = (await res.json()) as { additional_data: Record<string, unknown> };
    const pagination = (body.additional_data.pagination ?? body.additional_data) as {
      more_items_in_collection: boolean;
    };
    if (!pagination.more_items_in_collection) return pages;
  }
}

describe("the catch-up on v1 lists", () => {
  it("asks /v1/leads and /v1/notes for what changed, walks only the archived leads whole, and applies every change", async () => {
    const startedAt = new Date(Math.floor(Date.now() / 1000) * 1000 - 2000);
    const runId = await insertCrmRun(account.db, secrets, {
      tenantId,
      sourceAccount: "v1-catch-up",
      kinds: [...KINDS],
      baseUrl: sandbox.url,
      token: TOKEN,
      settings: { pageSize: String(PAGE) },
      startedAt,
    });
    const run = toRunInfo(
      (await account.db.query.runs.findFirst({ where: (r, { eq }) => eq(r.id, runId) }))!,
    );
    const seeds = await crmProvider.seedPhase(seedContext(undefined as never, run, 0, [...KINDS]));
    await drainTasks(account.db, secrets, runId, seeds);

    expect(sandbox.applyChanges()).toBe(true);
    const truth = sandbox.truth([...KINDS]).kinds;
    const archivedPages = await pagesOf("/v1/leads/archived");
    expect(await pagesOf("/v1/notes")).toBeGreaterThan(5);

    sandbox.resetStats();
    const catchUp = await crmProvider.seedPhase(seedContext(undefined as never, run, 1, [CATCH_UP]));
    const { statuses } = await drainTasks(account.db, secrets, runId, catchUp, 1);
    expect(statuses.every((s) => s === "succeeded" || s === "done")).toBe(true);
    // One page of changes from each filtered list; the archived list whole.
    expect(sandbox.stats().byCallType.list).toBe(1 + archivedPages + 1);

    // Every edit is in the product (its label ends " (edited)"), every addition in the ledger.
    for (const [kind, table, label] of [
      ["leads", "app.leads", "title"],
      ["notes", "app.notes", "content"],
    ] as const) {
      const { edited, added } = truth[kind]!;
      expect(edited.length).toBeGreaterThan(0);
      const rows = await account.db.execute<{ source_id: string; label: string }>(sql`
        select l.source_id, p.${sql.raw(label)} as label
          from drover.ledger l join ${sql.raw(table)} p on p.id = l.record_id
         where l.tenant_id = ${tenantId} and l.kind = ${kind} and l.source_id in ${[...edited, ...added]}`);
      const byId = new Map(rows.map((r) => [r.source_id, r.label]));
      for (const id of edited) expect(byId.get(id), `${kind} ${id}`).toMatch(/\(edited\)$/);
      for (const id of added) expect(byId.has(id), `${kind} ${id}`).toBe(true);
    }
  });
});
