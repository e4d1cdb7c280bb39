import { Code, RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, rejection, startCluster, until, untilFinished } from "../support/in-process.js";

/**
 * CloseMigration through the API: the answer says what will happen before it does, a live run
 * refuses it, a closed account starts no run, only a key with the revert scope may close, and past
 * the grace the leader removes the ledger so that a run of the account imports as if new.
 */
let c: Cluster;
const TENANT = "closing";

beforeAll(async () => {
  c = await startCluster({
    workers: 2,
    apiKeys: { steer: `tenant:${TENANT}`, closer: `tenant:${TENANT}+revert:${TENANT}` },
  });
});
afterAll(async () => {
  await c?.close();
});

const scope = { tenantId: TENANT, source: "crm", sourceAccount: "acct" };

async function ledgerRows(): Promise<number> {
  const [row] = await c.database.db.execute<{ n: number }>(
    sql`select count(*)::int as n from drover.ledger where tenant_id = ${TENANT}`,
  );
  return row!.n;
}

describe("closing a tenant's migration of an account", { timeout: 120_000 }, () => {
  it("is refused while a run of the account is live, then says what will happen, and no run starts until the ledger is gone", async () => {
    const closer = c.clientWith(c.tokens.closer);
    const live = await c.start(TENANT);
    const refused = await rejection(closer.closeMigration(scope));
    expect(refused.code).toBe(Code.FAILED_PRECONDITION);
    expect(refused.details).toMatchObject({ reason: "RUN_LIVE", run_id: live.id });
    expect((await untilFinished(c, live.id)).status).toBe(RunStatus.SUCCEEDED);
    const rows = await ledgerRows();
    expect(rows).toBeGreaterThan(0);

    // A tenant key may start and stop runs, not remove what makes them explainable.
    const denied = await rejection(c.clientWith(c.tokens.steer).closeMigration(scope));
    expect(denied.code).toBe(Code.PERMISSION_DENIED);

    const closed = await closer.closeMigration(scope);
    expect(Number(closed.ledgerRows)).toBe(rows);
    expect(closed.message).toMatch(
      new RegExp(`its ${rows} ledger rows are removed after .*imports as if new`),
    );
    const startRefused = await rejection(c.start(TENANT));
    expect(startRefused.code).toBe(Code.FAILED_PRECONDITION);
    expect(startRefused.details).toMatchObject({ reason: "MIGRATION_CLOSED" });
    expect(await ledgerRows()).toBe(rows);

    // Reopened while the ledger is there: a run of the account starts, and finds every row already here.
    const reopened = await closer.closeMigration({ ...scope, reopen: true });
    expect(reopened.message).toMatch(/open again/);
    const again = await untilFinished(c, (await c.start(TENANT)).id);
    const totals = again.progress.reduce(
      (t, p) => ({ imported: t.imported + p.imported, alreadyHere: t.alreadyHere + p.alreadyHere }),
      { imported: 0n, alreadyHere: 0n },
    );
    expect(totals.imported).toBe(0n);
    expect(totals.alreadyHere).toBeGreaterThan(0n);

    // Closed again and past its grace: the leader's reaper removes the ledger, and the next run
    // imports the account as if new.
    await closer.closeMigration(scope);
    await c.database.db.execute(sql`
      update drover.migration_closures set remove_after = now() - interval '1 second' where tenant_id = ${TENANT}`);
    await until(async () => (await ledgerRows()) === 0, 60_000);
    await until(async () => {
      const [row] = await c.database.db.execute<{ removed: boolean }>(sql`
        select removed_at is not null as removed from drover.migration_closures where tenant_id = ${TENANT}`);
      return row?.removed === true;
    }, 30_000);
    const fresh = await untilFinished(c, (await c.start(TENANT)).id);
    expect(fresh.status).toBe(RunStatus.SUCCEEDED);
    expect(fresh.progress.reduce((n, p) => n + p.alreadyHere, 0n)).toBe(0n);
    expect(await ledgerRows()).toBe(rows);

    // Each close and the reopen are in the audit trail, with what was asked.
    const audit = await c.database.db.execute<{ action: string; outcome: string }>(sql`
      select action, outcome from drover.audit_events where action = 'CloseMigration' and tenant_id = ${TENANT} order by id`);
    expect(audit.map((a) => a.outcome)).toEqual([
      "FAILED_PRECONDITION",
      "PERMISSION_DENIED",
      "ok",
      "ok",
      "ok",
    ]);
  });
});
