import { RunStatus } from "@drover/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, untilFinished } from "../support/in-process.js";

/**
 * ExplainRecord for a row that never reached the ledger: it says so, with the reason it knows —
 * the row's own note, or what the run was doing when it did not get there.
 */
let c: Cluster;

beforeAll(async () => {
  c = await startCluster({ sandbox: { malformedRate: 0.1 } });
});
afterAll(async () => {
  await c?.close();
});

const explain = (tenantId: string, kind: string, sourceId: string) =>
  c.client.explainRecord({ tenantId, source: "crm", sourceAccount: "acct", kind, sourceId });

describe("ExplainRecord", { timeout: 120_000 }, () => {
  it("says no run has imported the tenant yet", async () => {
    const res = await explain("nobody", "persons", "1");
    expect(res.found).toBe(false);
    expect(res.explanation).toBe(
      "persons 1 is not in the ledger and no note mentions it: no run has imported tenant nobody from this account yet",
    );
  });

  it("says which phase the live run is in and when it reaches the kind", async () => {
    const run = await c.start("waiting", ["organizations", "deals"]);
    const res = await explain("waiting", "deals", "3");
    expect(res.found).toBe(false);
    expect(res.explanation).toBe(
      `deals 3 is not in the ledger and no note mentions it: run ${run.id} is in phase 1 of 3 and reaches deals in phase 2`,
    );
    expect((await explain("waiting", "leads", "3")).explanation).toContain(
      `the latest run, ${run.id}, did not import leads`,
    );

    await c.client.stopRun({ runId: run.id });
    await untilFinished(c, run.id);
    expect((await explain("waiting", "organizations", "1")).explanation).toBe(
      `organizations 1 is not in the ledger and no note mentions it: run ${run.id} was stopped before its organizations tasks finished; resume it to read the rest`,
    );
  });

  it("gives a malformed row's reason from its note, and a written row's ledger entry", async () => {
    await c.addWorker();
    const run = await c.start("explained", ["organizations"]);
    await untilFinished(c, run.id);
    const [failed] = await c.database.sql<{ subject_id: string; reason: string }[]>`
      select subject_id, reason from drover.notes where run_id = ${run.id}::uuid and level = 'error' limit 1`;
    const missing = await explain("explained", "organizations", failed!.subject_id);
    expect(missing.found).toBe(false);
    expect(missing.explanation).toBe(
      `organizations ${failed!.subject_id} never reached the ledger: ${failed!.reason}`,
    );
    expect(missing.notes[0]).toMatchObject({ level: "error", reason: failed!.reason, runId: run.id });

    const [written] = await c.database.sql<{ source_id: string; record_id: string }[]>`
      select source_id, record_id from drover.ledger where run_id = ${run.id}::uuid and action = 'created' limit 1`;
    const found = await explain("explained", "organizations", written!.source_id);
    expect(found.found).toBe(true);
    expect(found.entry).toMatchObject({ action: "created", recordId: written!.record_id, runId: run.id });
    expect(found.explanation).toContain(`was created as`);

    // An id the source never listed: the run read every page without it.
    expect((await explain("explained", "organizations", "999999")).explanation).toBe(
      `organizations 999999 is not in the ledger and no note mentions it: run ${run.id} read every organizations page and the source did not list it then (created since, or not visible to the token)`,
    );
  });

  it("says a mail-only run read no mail because no deal is in the ledger, and the run leaves a warning", async () => {
    const run = await c.start("mail-only", ["mail"]);
    const done = await untilFinished(c, run.id);
    expect(done.status).toBe(RunStatus.SUCCEEDED);
    const reason =
      "mail is listed per deal, and no deal of this tenant and account is in the ledger, so no message was read; import deals first, or in the same run (kinds deals,mail)";
    const { groups } = await c.client.listNotes({ runId: run.id });
    expect(groups.map((g) => [g.level, g.kind, g.reason, g.count])).toEqual([["warn", "mail", reason, 1n]]);
    expect((await explain("mail-only", "mail", "1")).explanation).toBe(
      `mail 1 is not in the ledger and no note mentions it: run ${run.id} read no mail: ${reason}`,
    );
  });

  it("says a mail-only run read the mail of the deals already in the ledger only", async () => {
    if (c.workers.length === 0) await c.addWorker();
    const deals = await untilFinished(c, (await c.start("mail-later", ["deals"])).id);
    const imported = deals.progress.find((p) => p.kind === "deals")!;
    const inLedger = Number(imported.imported + imported.matched);
    const run = await untilFinished(c, (await c.start("mail-later", ["mail"])).id);
    expect(run.status).toBe(RunStatus.SUCCEEDED);
    expect(run.progress.find((p) => p.kind === "mail")!.imported).toBeGreaterThan(0n);
    const { groups } = await c.client.listNotes({ runId: run.id, level: "info" });
    expect(groups.map((g) => [g.kind, g.reason])).toEqual([
      [
        "mail",
        `mail was listed for the ${inLedger} deal(s) already in the ledger only: deals not imported yet were not read; import deals first, or in the same run (kinds deals,mail)`,
      ],
    ]);
  });

  it("never says a run read every page of a kind it started no task of", async () => {
    // A finished run whose plan holds notes, none of whose tasks were ever seeded.
    const [row] = await c.database.sql<{ id: string }[]>`
      insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, current_phase, started_at, finished_at)
      values ('no-tasks', 'crm', 'acct', array['notes'], '[["notes"]]'::jsonb, 'succeeded', 1, now(), now())
      returning id`;
    expect((await explain("no-tasks", "notes", "5")).explanation).toBe(
      `notes 5 is not in the ledger and no note mentions it: run ${row!.id} read no notes: no notes task was started (the source had nothing to list, or what notes hangs off was not imported)`,
    );
  });
});
