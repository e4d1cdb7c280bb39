import type { ProductRecords } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimTask, LostClaimError, runRevertTask } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

const RECORDS: ProductRecords = {
  tables: { company: "app.companies", contact: "app.contacts" },
  links: [{ recordType: "contact", column: "company_id", parent: "company" }],
};

/** A finished run that created `n` companies (ledger rows from id `firstId`) and matched one more. */
async function importedRun(n: number, firstId: number) {
  const run = await insertRun(h.db, {
    status: "succeeded",
    kinds: ["organizations"],
    plan: [["organizations"]],
  });
  const ids = await h.db.execute<{ id: string }>(sql`
    insert into app.companies (tenant_id, name)
    select ${run.tenantId}, 'company ' || g from generate_series(1, ${n + 1}) g returning id::text`);
  for (const [i, c] of ids.entries())
    await h.db.execute(sql`
      insert into drover.ledger (id, tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
      values (${firstId + i}, ${run.tenantId}, 'test', 'acct', 'organizations', ${String(i)},
              ${i === n ? "matched" : "created"}, 'company', ${c.id}, ${run.id})`);
  return run;
}

async function revertTask(target: { id: string; tenantId: string }, force = false) {
  const revert = await insertRun(h.db, {
    tenantId: target.tenantId,
    revertsRunId: target.id,
    revertForce: force,
    kinds: ["organizations"],
    plan: [["organizations"]],
  });
  const t = await insertTask(h.db, revert.id, { kind: "organizations", cursor: { afterLedgerId: 0 } });
  const claimed = (await claimTask(h.db, t.id, `w/${t.id}`))!;
  const deps = {
    db: h.db,
    run: revert,
    revertsRunId: target.id,
    records: RECORDS,
    task: { id: claimed.id, kind: "organizations", cursor: claimed.cursor },
    claimToken: `w/${t.id}`,
    notesCap: 100,
    windowSize: 3,
    stopRequested: async () => false,
  };
  return { revert, task: claimed, deps };
}

async function count(tenantId: string, table: string): Promise<number> {
  const [r] = await h.db.execute<{ n: string }>(
    sql`select count(*)::text as n from ${sql.raw(table)} where tenant_id = ${tenantId}`,
  );
  return Number(r!.n);
}

describe("a revert task", () => {
  it("walks the ledger in id order across a digit boundary (999 → 1000), removing every created record once", async () => {
    const target = await importedRun(8, 995);
    const { deps } = await revertTask(target);
    const { summary } = await runRevertTask(deps);
    expect(summary).toEqual({ removed: 8, gone: 0, kept: 0 });
    // The matched company stays, with its ledger row; the created ones are gone with theirs.
    expect(await count(target.tenantId, "app.companies")).toBe(1);
    const left = await h.db.execute<{ action: string }>(
      sql`select action from drover.ledger where run_id = ${target.id}::uuid`,
    );
    expect(left.map((r) => r.action)).toEqual(["matched"]);
  });

  it("under a lost claim removes nothing: the window rolls back with its checkpoint", async () => {
    const target = await importedRun(4, 5_000);
    const { deps } = await revertTask(target);
    await expect(runRevertTask({ ...deps, claimToken: "someone-else" })).rejects.toBeInstanceOf(
      LostClaimError,
    );
    expect(await count(target.tenantId, "app.companies")).toBe(5);
    const [l] = await h.db.execute<{ n: string }>(
      sql`select count(*)::text as n from drover.ledger where run_id = ${target.id}::uuid`,
    );
    expect(l!.n).toBe("5");
  });

  it("keeps a record another run's record links to, with a note, unless forced", async () => {
    const target = await importedRun(2, 6_000);
    const [company] = await h.db.execute<{ id: string }>(sql`
      select record_id::text as id from drover.ledger where run_id = ${target.id}::uuid and action = 'created' order by id limit 1`);
    const later = await insertRun(h.db, { tenantId: target.tenantId, status: "succeeded" });
    const [contact] = await h.db.execute<{ id: string }>(sql`
      insert into app.contacts (tenant_id, name, company_id) values (${target.tenantId}, 'p', ${company!.id}) returning id::text`);
    await h.db.execute(sql`
      insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
      values (${target.tenantId}, 'test', 'acct', 'persons', 'p1', 'created', 'contact', ${contact!.id}, ${later.id})`);

    const refused = await revertTask(target);
    expect((await runRevertTask(refused.deps)).summary).toEqual({ removed: 1, gone: 0, kept: 1 });
    const notes = await h.db.execute<{ reason: string; subject_id: string }>(
      sql`select reason, subject_id from drover.notes where run_id = ${refused.revert.id}::uuid`,
    );
    expect(notes).toEqual([
      {
        subject_id: "0",
        reason: `not reverted: run ${later.id}'s persons link to it through app.contacts.company_id; revert with force to clear such links`,
      },
    ]);

    // Forced (a second revert task over what is left): the link is cleared and the company goes.
    await h.db.execute(
      sql`update drover.runs set reverts_run_id = null, status = 'succeeded' where id = ${refused.revert.id}::uuid`,
    );
    const forced = await revertTask(target, true);
    expect((await runRevertTask(forced.deps)).summary).toEqual({ removed: 1, gone: 0, kept: 0 });
    const [linked] = await h.db.execute<{ company_id: string | null }>(
      sql`select company_id from app.contacts where id = ${contact!.id}`,
    );
    expect(linked!.company_id).toBeNull();
  });
});
