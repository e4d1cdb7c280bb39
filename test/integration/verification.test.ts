import { SecretKeyring } from "@drover/auth";
import type { Truth } from "@drover/crm-sandbox";
import { Code, type Run, RunStatus, timestampDate, type Verification } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, until, untilFinished } from "../support/in-process.js";

/**
 * Verification of finished runs: automatic once a run ends, on demand with VerifyRun, stored on the
 * run and shown by GetRun. Against the real sandbox, with malformed rows, then with the destination
 * and the ledger tampered with: every mismatch must be listed with its ids.
 */
let c: Cluster;
let truth: Truth;
const TENANT = "verify-acme";

/** Where the run's source credential was opened: one stack per SecretKeyring.open call. */
const opened: string[] = [];
const originalOpen = SecretKeyring.prototype.open;

beforeAll(async () => {
  SecretKeyring.prototype.open = function (this: SecretKeyring, ...args) {
    opened.push(new Error("opened here").stack ?? "");
    return originalOpen.apply(this, args);
  };
  c = await startCluster({ workers: 2, laneWidth: 2, sandbox: { malformedRate: 0.03 } });
  truth = c.sandbox.truth();
});
afterAll(async () => {
  SecretKeyring.prototype.open = originalOpen;
  await c?.close();
});

const mismatches = (v: Verification) => v.kinds.flatMap((k) => k.mismatches.map((m) => `${k.kind} ${m}`));

describe("verification", { timeout: 60_000 }, () => {
  let run: Run;

  it("verifies a finished run automatically: counts agree with the source and the sample matches field by field", async () => {
    const started = await c.start(TENANT);
    const done = await untilFinished(c, started.id);
    expect(done.status).toBe(RunStatus.SUCCEEDED);
    run = await until(
      async () => {
        const { run: r } = await c.client.getRun({ runId: started.id });
        return r?.verification ? r : undefined;
      },
      30_000,
      "the automatic verification",
    );
    const v = run.verification!;
    expect(mismatches(v)).toEqual([]);
    expect(v.error).toBe("");
    expect(v.ok).toBe(true);
    // The catch-up phase writes under the kinds it catches up; it has no rows of its own to verify.
    expect(v.kinds.map((k) => k.kind)).toEqual(
      run.phases.flatMap((p) => p.kinds).filter((kind) => kind !== "catch-up"),
    );
    for (const k of v.kinds) {
      const t = truth.kinds[k.kind as keyof Truth["kinds"]];
      expect({ kind: k.kind, source: Number(k.sourceCount) }).toEqual({ kind: k.kind, source: t.count });
      expect(Number(k.ledgerCount) + Number(k.failedCount)).toBe(t.count);
      // Every malformed row failed with a reason, and nothing else did.
      expect({ kind: k.kind, failed: Number(k.failedCount) }).toEqual({
        kind: k.kind,
        failed: t.malformed.length,
      });
      expect(k.sampled).toBeGreaterThan(0n);
    }
    expect(v.verifiedAt).toBeDefined();
  });

  it("VerifyRun verifies on demand, stores the result and answers it", async () => {
    const before = run.verification!.verifiedAt!;
    c.sandbox.resetStats();
    const { verification } = await c.client.verifyRun({ runId: run.id });
    // Not a second import: no list is walked again. The source is asked for a count probe per v1
    // list (3), the v2 kinds' samples by ids (a request per kind here), and mail's sample through
    // its deals' lists (at most one per sampled message, 40); leads and notes by id (40 each).
    const cost = c.sandbox.stats().byCallType;
    expect(cost.list ?? 0).toBeLessThanOrEqual(3 + 4 + 40);
    expect(cost.get ?? 0).toBeLessThanOrEqual(40 + 40 + 10);
    expect(verification!.ok).toBe(true);
    expect(verification!.kinds.map((k) => [k.kind, k.sourceCount, k.sampled])).toEqual(
      run.verification!.kinds.map((k) => [k.kind, k.sourceCount, k.sampled]),
    );
    const { run: again } = await c.client.getRun({ runId: run.id });
    expect(timestampDate(again!.verification!.verifiedAt!).getTime()).toBeGreaterThan(
      timestampDate(before).getTime(),
    );
  });

  it("lists every mismatch with its ids: a changed field, a wrong link, a lost row, an unexpected row, a missing record", async () => {
    const db = c.database.db;
    // Each altered row is the first of its kind in the sample's order (source-comparison.ts): only a
    // share of a kind is sampled (a fifth where rows are fetched one GET each).
    const [person] = await db.execute<{ source_id: string; record_id: string }>(sql`
      select source_id, record_id::text as record_id from drover.ledger
       where tenant_id = ${TENANT} and kind = 'persons' and action = 'created' order by md5(${run.id} || source_id) limit 1`);
    await db.execute(
      sql`update app.contacts set name = 'Someone Else' where id = ${person!.record_id}::bigint`,
    );
    // A deal linked to its organization: the link is cleared and the title changed.
    const [deal] = await db.execute<{ source_id: string; record_id: string; company_id: string }>(sql`
      select l.source_id, l.record_id::text as record_id, d.company_id::text as company_id
        from drover.ledger l join app.deals d on d.id = l.record_id
       where l.tenant_id = ${TENANT} and l.kind = 'deals' and l.action = 'created' and d.company_id is not null
       order by md5(${run.id} || l.source_id) limit 1`);
    await db.execute(
      sql`update app.deals set company_id = null, title = 'Renamed' where id = ${deal!.record_id}::bigint`,
    );
    // A lead's archived flag flipped in the destination: archived and live leads differ by it alone.
    const [lead] = await db.execute<{ source_id: string; record_id: string; archived: boolean }>(sql`
      select l.source_id, l.record_id::text as record_id, x.archived from drover.ledger l join app.leads x on x.id = l.record_id
       where l.tenant_id = ${TENANT} and l.kind = 'leads' and l.action = 'created' order by md5(${run.id} || l.source_id) limit 1`);
    await db.execute(sql`update app.leads set archived = not archived where id = ${lead!.record_id}::bigint`);
    // An organization nobody links to loses its ledger row: lost.
    const [lost] = await db.execute<{ source_id: string }>(sql`
      select l.source_id from drover.ledger l
       where l.tenant_id = ${TENANT} and l.kind = 'organizations'
         and not exists (select 1 from app.contacts x where x.company_id = l.record_id)
         and not exists (select 1 from app.deals x where x.company_id = l.record_id)
         and not exists (select 1 from app.leads x where x.company_id = l.record_id)
         and not exists (select 1 from app.activities x where x.company_id = l.record_id)
         and not exists (select 1 from app.notes x where x.company_id = l.record_id)
       order by l.source_id limit 1`);
    await db.execute(
      sql`delete from drover.ledger where tenant_id = ${TENANT} and kind = 'organizations' and source_id = ${lost!.source_id}`,
    );
    // A note's destination record disappears.
    const [note] = await db.execute<{ source_id: string; record_id: string }>(sql`
      delete from app.notes where id = (select record_id from drover.ledger
        where tenant_id = ${TENANT} and kind = 'notes' and action = 'created'
        order by md5(${run.id} || source_id) limit 1)
      returning id::text as record_id, ''::text as source_id`);
    // The ledger claims a lead the source never had.
    await db.execute(sql`
      insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
      values (${TENANT}, 'crm', 'acct', 'leads', 'not-a-lead-999', 'created', 'lead', 1, ${run.id}::uuid)`);

    const { verification } = await c.client.verifyRun({ runId: run.id });
    const v = verification!;
    expect(v.ok).toBe(false);
    const all = mismatches(v);
    const matching = (pattern: RegExp) => all.filter((m) => pattern.test(m));
    expect(
      matching(
        new RegExp(
          `^persons ${person!.source_id}: name is ".+" in the source but "Someone Else" in contact ${person!.record_id}$`,
        ),
      ),
    ).toHaveLength(1);
    expect(
      matching(
        new RegExp(
          `^deals ${deal!.source_id}: title is ".+" in the source but "Renamed" in deal ${deal!.record_id}$`,
        ),
      ),
    ).toHaveLength(1);
    expect(
      matching(
        new RegExp(
          `^leads ${lead!.source_id}: archived is "${lead!.archived}" in the source but "${!lead!.archived}" in lead ${lead!.record_id}$`,
        ),
      ),
    ).toHaveLength(1);
    expect(
      matching(
        new RegExp(
          `^deals ${deal!.source_id}: organization link is empty in deal ${deal!.record_id} but should be ${deal!.company_id} \\(source organizations \\d+\\)$`,
        ),
      ),
    ).toHaveLength(1);
    expect(
      matching(
        new RegExp(
          `^organizations ${lost!.source_id}: in the source, but neither in the ledger nor noted as failed \\(lost\\)$`,
        ),
      ),
    ).toHaveLength(1);
    expect(
      matching(/^organizations the source lists \d+ organizations; the ledger holds \d+ and \d+ failed/),
    ).toHaveLength(1);
    expect(
      matching(
        /^leads not-a-lead-999: in the ledger \(created as lead 1\), but not in the source \(unexpected\)$/,
      ),
    ).toHaveLength(1);
    expect(
      matching(
        new RegExp(
          `^notes \\d+: the ledger points at note ${note!.record_id}, which does not exist for this tenant$`,
        ),
      ),
    ).toHaveLength(1);
    // Nothing else is reported: mail was not touched.
    expect(v.kinds.find((k) => k.kind === "mail")!.mismatches).toEqual([]);

    // GetRun shows the stored result.
    const { run: shown } = await c.client.getRun({ runId: run.id });
    expect(mismatches(shown!.verification!)).toEqual(all);
  });

  it("VerifyRun while the source is down answers UNAVAILABLE with the reason, and the worker tries again later", async () => {
    const faults = (rate: number) =>
      fetch(`${c.sandbox.url}/__sandbox/faults?transientErrorRate=${rate}`, { method: "POST" });
    await faults(1);
    try {
      const err = await c.client.verifyRun({ runId: run.id }).then(
        () => undefined,
        (e: unknown) => e as { code: number; message: string },
      );
      expect(err?.code).toBe(Code.UNAVAILABLE);
      expect(err?.message).toMatch(
        new RegExp(`^run ${run.id} could not be verified now: .*5\\d\\d.*; it is tried again automatically`),
      );
    } finally {
      await faults(0);
    }
    const [request] = await c.database.db.execute<{ status: string; last_error: string }>(
      sql`select status, last_error from drover.verification_requests where run_id = ${run.id}::uuid`,
    );
    expect(request).toMatchObject({ status: "pending", last_error: expect.stringMatching(/5\d\d/) });
  });

  it("the source credential is opened only by workers: by their tasks and their verifications, never by a coordinator", () => {
    expect(opened.length).toBeGreaterThan(0);
    const where = opened.map((stack) =>
      /runVerification/.test(stack) ? "verification" : /runAssignment/.test(stack) ? "task" : stack,
    );
    expect(new Set(where)).toEqual(new Set(["task", "verification"]));
  });
});
