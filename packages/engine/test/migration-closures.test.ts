import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  admitRun,
  closeMigration,
  MigrationClosed,
  MigrationLive,
  removeClosedLedgers,
  reopenMigration,
} from "../src/index.js";
import { type Harness, newRun, openHarness, testProvider } from "./helpers.js";

/**
 * A closed migration: no run of the account starts while its ledger waits for removal, no close
 * lands while a run of it is live (even when both arrive at once), and past the grace the ledger
 * goes in batches, after which the account imports as if new.
 */
let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

const HOUR = 3_600_000;

const scopeOf = (tenantId: string, sourceAccount = "acct") => ({ tenantId, source: "test", sourceAccount });

async function ledgerOf(tenantId: string, runId: string, n: number): Promise<void> {
  await h.db.execute(sql`
    insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, run_id)
    select ${tenantId}, 'test', 'acct', 'companies', i::text, 'skipped', ${runId}::uuid
      from generate_series(1, ${n}) as i`);
}

async function ledgerCount(tenantId: string): Promise<number> {
  const [row] = await h.db.execute<{ n: number }>(
    sql`select count(*)::int as n from drover.ledger where tenant_id = ${tenantId}`,
  );
  return row!.n;
}

const finish = (runId: string) =>
  h.db.execute(
    sql`update drover.runs set status = 'succeeded', finished_at = now() where id = ${runId}::uuid`,
  );

describe("closing a migration", () => {
  it("is refused while a run of the account is live, and refuses runs of the account until its ledger is removed", async () => {
    const tenant = "close-live";
    const run = await admitRun(
      h.db,
      testProvider(() => []),
      newRun(tenant),
    );
    const refused = await closeMigration(h.db, scopeOf(tenant), HOUR).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(MigrationLive);
    expect((refused as MigrationLive).runId).toBe(run.id);
    await finish(run.id);

    const closure = await closeMigration(h.db, scopeOf(tenant), HOUR);
    expect(closure.removeAfter.getTime() - closure.closedAt.getTime()).toBe(HOUR);
    // A second close answers the first, its times unchanged.
    expect(await closeMigration(h.db, scopeOf(tenant), 5 * HOUR)).toEqual(closure);
    const start = await admitRun(
      h.db,
      testProvider(() => []),
      newRun(tenant),
    ).catch((e: unknown) => e);
    expect(start).toBeInstanceOf(MigrationClosed);
    // Another account of the tenant, and a dry run (it writes no ledger), are not held back.
    await admitRun(
      h.db,
      testProvider(() => []),
      newRun(tenant, "other-acct"),
    );
    await admitRun(
      h.db,
      testProvider(() => []),
      { ...newRun(tenant), dryRun: true },
    );

    expect(await reopenMigration(h.db, scopeOf(tenant))).toBe(true);
    expect(await reopenMigration(h.db, scopeOf(tenant))).toBe(false);
    await admitRun(
      h.db,
      testProvider(() => []),
      newRun(tenant),
    );
  });

  it("never leaves a close and a live run of one account together, however a start and a close race", async () => {
    for (let i = 0; i < 20; i++) {
      const tenant = `close-race-${i}`;
      const [admitted, closed] = await Promise.allSettled([
        admitRun(
          h.db,
          testProvider(() => []),
          newRun(tenant),
        ),
        closeMigration(h.db, scopeOf(tenant), HOUR),
      ]);
      // Exactly one wins; the loser is told why.
      expect([admitted.status, closed.status].sort()).toEqual(["fulfilled", "rejected"]);
      if (admitted.status === "rejected") expect(admitted.reason).toBeInstanceOf(MigrationClosed);
      if (closed.status === "rejected") expect(closed.reason).toBeInstanceOf(MigrationLive);
    }
  });

  it("past its grace removes the account's ledger in batches, a pass at a time, and then lets a run import it as new", async () => {
    const tenant = "close-remove";
    const run = await admitRun(
      h.db,
      testProvider(() => []),
      newRun(tenant),
    );
    await ledgerOf(tenant, run.id, 2_500);
    await finish(run.id);
    await closeMigration(h.db, scopeOf(tenant), 0);
    // A budget of one batch a pass: the removal goes on across passes, each a short transaction.
    let passes = 0;
    while ((await ledgerCount(tenant)) > 0) {
      await removeClosedLedgers(h.db, { batch: 1_000, budgetMs: 0 });
      passes++;
      expect(passes).toBeLessThan(10);
    }
    expect(passes).toBe(3);
    // The batch that found fewer rows than it asked for was the last: the closure is marked removed
    // in that pass, and the account imports as if new.
    const [closure] = await h.db.execute<{ removed: boolean }>(sql`
      select removed_at is not null as removed from drover.migration_closures where tenant_id = ${tenant}`);
    expect(closure!.removed).toBe(true);
    await admitRun(
      h.db,
      testProvider(() => []),
      newRun(tenant),
    );
  });
});
