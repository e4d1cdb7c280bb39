import { openDatabase } from "@drover/db";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { claimTask, finishTaskSucceeded, progressRun } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness, testProvider } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness(30);
});
afterAll(async () => {
  await h.close();
});

describe("phase barrier", () => {
  it("fifty tasks finishing at once: the barrier advances once and the next phase is seeded once", async () => {
    let seedCalls = 0;
    const provider = testProvider(
      (phase) =>
        Array.from({ length: 3 }, (_, i) => ({ kind: "contacts", seedKey: `p${phase}-${i}`, cursor: {} })),
      () => seedCalls++,
    );
    const providers = new Map([["test", provider]]);
    const run = await insertRun(h.db, {
      kinds: ["companies", "contacts"],
      plan: [["companies"], ["contacts"]],
    });
    const claimed = [];
    for (let i = 0; i < 50; i++) {
      const t = await insertTask(h.db, run.id);
      claimed.push((await claimTask(h.db, t.id, `w${i}/1`))!);
    }
    // Five pools of finishers so the race happens on many backends at once.
    const pools = Array.from({ length: 5 }, () => openDatabase(h.testDb.url, { max: 10 }));
    try {
      const results = await Promise.all(
        claimed.map(async (task, i) => {
          const pool = pools[i % pools.length]!;
          await pool.db.transaction((tx) => finishTaskSucceeded(tx, task, task.lockedBy!));
          return progressRun({ db: pool.db, providers, notesCap: 1000 }, run.id);
        }),
      );
      expect(results.filter((r) => r.kind === "advanced")).toHaveLength(1);
      expect(seedCalls).toBe(1);
      const [counts] = await h.db.execute<{ phase1: number; current: number }>(sql`
        select (select count(*)::int from drover.tasks where run_id = ${run.id} and phase = 1) as phase1,
               (select current_phase from drover.runs where id = ${run.id}) as current`);
      expect(counts).toEqual({ phase1: 3, current: 1 });
    } finally {
      await Promise.all(pools.map((p) => p.close()));
    }
  });

  it("never advances while a task of the phase is pending or running", async () => {
    const providers = new Map([["test", testProvider(() => [])]]);
    const run = await insertRun(h.db, {
      kinds: ["companies", "contacts"],
      plan: [["companies"], ["contacts"]],
    });
    const a = await insertTask(h.db, run.id);
    const b = await insertTask(h.db, run.id);
    const ca = (await claimTask(h.db, a.id, "w/a"))!;
    await claimTask(h.db, b.id, "w/b");
    await h.db.transaction((tx) => finishTaskSucceeded(tx, ca, "w/a"));
    expect(await progressRun({ db: h.db, providers, notesCap: 10 }, run.id)).toEqual({ kind: "unchanged" });
    const [r] = await h.db.execute<{ current_phase: number }>(
      sql`select current_phase from drover.runs where id = ${run.id}`,
    );
    expect(r!.current_phase).toBe(0);
  });

  it("a task ending while others of its phase are open costs one read: no transaction, no lock on the run's row", async () => {
    const providers = new Map([["test", testProvider(() => [])]]);
    const run = await insertRun(h.db, {
      kinds: ["companies", "contacts"],
      plan: [["companies"], ["contacts"]],
    });
    const a = await insertTask(h.db, run.id);
    await insertTask(h.db, run.id);
    const ca = (await claimTask(h.db, a.id, "w/a"))!;
    await h.db.transaction((tx) => finishTaskSucceeded(tx, ca, "w/a"));
    const sent: string[] = [];
    const watched = openDatabase(h.testDb.url, { max: 2, debug: (q) => sent.push(q.trim()) });
    // Another session holds the run's row: a progressRun that wanted it would wait.
    let release!: () => void;
    const holding = new Promise<void>((resolve) => {
      release = resolve;
    });
    let held!: () => void;
    const locked = new Promise<void>((resolve) => {
      held = resolve;
    });
    const holder = h.db.transaction(async (tx) => {
      await tx.execute(sql`select 1 from drover.runs where id = ${run.id} for update`);
      held();
      await holding;
    });
    try {
      await locked;
      expect(await progressRun({ db: watched.db, providers, notesCap: 10 }, run.id)).toEqual({
        kind: "unchanged",
      });
      expect(sent.filter((q) => !q.startsWith("select b.oid"))).toHaveLength(1);
      expect(sent.some((q) => /^begin/i.test(q))).toBe(false);
    } finally {
      release();
      await holder;
      await watched.close();
    }
  });

  it("a phase that seeds nothing passes at once and the run finishes", async () => {
    const providers = new Map([["test", testProvider(() => [])]]);
    const run = await insertRun(h.db, {
      kinds: ["companies", "contacts"],
      plan: [["companies"], ["contacts"]],
    });
    const t = (await claimTask(h.db, (await insertTask(h.db, run.id)).id, "w/1"))!;
    await h.db.transaction((tx) => finishTaskSucceeded(tx, t, "w/1"));
    expect(await progressRun({ db: h.db, providers, notesCap: 10 }, run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
    });
  });

  it("a run with a failed task finishes as failed, naming the error", async () => {
    const providers = new Map([["test", testProvider(() => [])]]);
    const run = await insertRun(h.db);
    const t = await insertTask(h.db, run.id);
    await h.db.execute(
      sql`update drover.tasks set status = 'failed', last_error = 'boom' where id = ${t.id}`,
    );
    expect(await progressRun({ db: h.db, providers, notesCap: 10 }, run.id)).toEqual({
      kind: "finished",
      status: "failed",
    });
    const [r] = await h.db.execute<{ error: string }>(
      sql`select error from drover.runs where id = ${run.id}`,
    );
    expect(r!.error).toContain("boom");
  });
});

describe("same-phase references written in a later phase", () => {
  it("resolve when that phase's barrier passes: a re-drive's contacts get the company re-driven beside them", async () => {
    const provider = {
      ...testProvider(() => []),
      deferredLinks: [{ kind: "contacts", ref: "companies", table: "app.contacts", column: "company_id" }],
    };
    const providers = new Map([["test", provider]]);
    // Phase 1 is a closing pass; the re-drive put a contacts task in it.
    const run = await insertRun(h.db, {
      kinds: ["companies", "contacts", "closing"],
      plan: [["companies", "contacts"], ["closing"]],
      currentPhase: 1,
    });
    const task = await insertTask(h.db, run.id, { kind: "contacts", phase: 1 });
    const [company] = await h.db.execute<{ id: string }>(sql`
      insert into app.companies (tenant_id, name) values (${run.tenantId}, 'Acme') returning id`);
    const [contact] = await h.db.execute<{ id: string }>(sql`
      insert into app.contacts (tenant_id, name) values (${run.tenantId}, 'Ann') returning id`);
    // The contact was written before its company (both re-driven at once): its reference waits.
    await h.db.execute(sql`
      insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, pending_refs, run_id)
      values (${run.tenantId}, 'test', 'acct', 'companies', '5', 'created', 'company', ${company!.id}, null, ${run.id}::uuid),
             (${run.tenantId}, 'test', 'acct', 'contacts', '9', 'created', 'contact', ${contact!.id}, '{"companies":"5"}'::jsonb, ${run.id}::uuid)`);
    const claimed = (await claimTask(h.db, task.id, "w/1"))!;
    await h.db.transaction((tx) => finishTaskSucceeded(tx, claimed, claimed.lockedBy!));
    expect(await progressRun({ db: h.db, providers, notesCap: 1000 }, run.id)).toEqual({
      kind: "finished",
      status: "succeeded",
    });
    const [linked] = await h.db.execute<{ company_id: string | null }>(sql`
      select company_id from app.contacts where id = ${contact!.id}`);
    expect(String(linked!.company_id)).toBe(String(company!.id));
  });
});
