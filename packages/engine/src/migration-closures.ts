import {
  type Db,
  LIVE_RUN_STATUSES,
  type MigrationClosureRow,
  migrationClosures,
  type Queryable,
  runStatusIn,
} from "@drover/db";
import { and, eq, sql } from "drizzle-orm";
import type { LiveRunScope } from "./live-run-conflict.js";

/**
 * Closing a tenant's migration of one source account: the ledger that makes re-runs idempotent
 * (and explain, revert and verification possible) is kept through a grace period, then removed in
 * small batches, so it does not grow for ever (docs/scale.md). A run of the account after that
 * imports as if new.
 *
 * What fences what: a close and a run's admission of the same account take the same transaction
 * advisory lock (`lockScope`), so of a StartRun and a CloseMigration at the same instant one sees
 * the other: the admission sees the closure and refuses, or the close sees the live run and
 * refuses. Removal never runs while a run of the account is live.
 */

/** The account's migration is closed and its ledger not removed yet: no run may start on it. */
export class MigrationClosed extends Error {
  constructor(readonly closure: MigrationClosureRow) {
    super(
      `the migration of ${closure.source}:${closure.sourceAccount} for tenant "${closure.tenantId}" was closed at ${closure.closedAt.toISOString()}; its ledger is removed after ${closure.removeAfter.toISOString()}, and a run after that imports as if new (reopen it with CloseMigration reopen to run it again before)`,
    );
    this.name = "MigrationClosed";
  }
}

/** A close refused because a run of the account is live (running or stopping). */
export class MigrationLive extends Error {
  constructor(readonly runId: string) {
    super(
      `run ${runId} of this account is live; stop it (or, following, complete it) and wait for it to finish before closing the migration`,
    );
    this.name = "MigrationLive";
  }
}

/** Serializes a close and an admission of one tenant's source account (held to the transaction's end). */
export async function lockScope(tx: Queryable, scope: LiveRunScope): Promise<void> {
  await tx.execute(sql`
    select pg_advisory_xact_lock(hashtextextended(${JSON.stringify([scope.tenantId, scope.source, scope.sourceAccount])}, 42))`);
}

/** The account's closure whose ledger is still there, if any. */
export async function openClosure(
  q: Queryable,
  scope: LiveRunScope,
): Promise<MigrationClosureRow | undefined> {
  const [row] = await q.execute<Record<string, unknown>>(sql`
    select tenant_id, source, source_account, closed_at, remove_after, removed_at,
           removed_through_kind, removed_through_source_id
      from drover.migration_closures
     where tenant_id = ${scope.tenantId} and source = ${scope.source} and source_account = ${scope.sourceAccount}
       and removed_at is null`);
  return row ? closureRow(row) : undefined;
}

/** In an admission's transaction: refuses a run of a closed account (after taking the scope's lock). */
export async function refuseClosedMigration(tx: Queryable, scope: LiveRunScope): Promise<void> {
  await lockScope(tx, scope);
  const closure = await openClosure(tx, scope);
  if (closure) throw new MigrationClosed(closure);
}

/**
 * Closes the account's migration, its ledger removed after `graceMs`; a second close answers the
 * first (its times unchanged). Refused while a run of the account is live.
 */
export async function closeMigration(
  db: Db,
  scope: LiveRunScope,
  graceMs: number,
): Promise<MigrationClosureRow> {
  return db.transaction(async (tx) => {
    await lockScope(tx, scope);
    const [live] = await tx.execute<{ id: string }>(sql`
      select id from drover.runs
       where tenant_id = ${scope.tenantId} and source = ${scope.source} and source_account = ${scope.sourceAccount}
         and status in ${runStatusIn(LIVE_RUN_STATUSES)} and not dry_run
       limit 1`);
    if (live) throw new MigrationLive(live.id);
    await tx.execute(sql`
      insert into drover.migration_closures (tenant_id, source, source_account, closed_at, remove_after)
      values (${scope.tenantId}, ${scope.source}, ${scope.sourceAccount}, now(),
              now() + make_interval(secs => ${graceMs / 1000}))
      on conflict (tenant_id, source, source_account) do update
        set closed_at = now(), remove_after = excluded.remove_after, removed_at = null,
            removed_through_kind = null, removed_through_source_id = null
        where migration_closures.removed_at is not null`);
    return (await openClosure(tx, scope))!;
  });
}

/** Withdraws a close whose ledger is still there; false when there was none to withdraw. */
export async function reopenMigration(db: Db, scope: LiveRunScope): Promise<boolean> {
  const gone = await db
    .delete(migrationClosures)
    .where(
      and(
        eq(migrationClosures.tenantId, scope.tenantId),
        eq(migrationClosures.source, scope.source),
        eq(migrationClosures.sourceAccount, scope.sourceAccount),
        sql`${migrationClosures.removedAt} is null`,
      ),
    )
    .returning({ tenantId: migrationClosures.tenantId });
  return gone.length > 0;
}

/** The account's ledger rows. */
export async function ledgerRows(q: Queryable, scope: LiveRunScope): Promise<number> {
  const [row] = await q.execute<{ n: number }>(sql`
    select count(*)::int as n from drover.ledger
     where tenant_id = ${scope.tenantId} and source = ${scope.source} and source_account = ${scope.sourceAccount}`);
  return row?.n ?? 0;
}

/**
 * The leader's share of a pass: for closures past their grace, ledger rows removed `batch` at a
 * time, each batch its own short transaction (a few milliseconds of row locks on rows no live run
 * touches: the account has none), at least one a pass and more until `budgetMs` is spent; a closure
 * with nothing left is marked removed. A closure whose account has a live run waits (a reopen and a run started meanwhile).
 * Returns the rows removed.
 */
export async function removeClosedLedgers(
  db: Db,
  options: { batch?: number; budgetMs?: number } = {},
): Promise<number> {
  const batch = options.batch ?? 5_000;
  const until = Date.now() + (options.budgetMs ?? 500);
  const due = await db.execute<{ tenant_id: string; source: string; source_account: string }>(sql`
    select tenant_id, source, source_account from drover.migration_closures c
     where removed_at is null and remove_after <= now()
       and not exists (select 1 from drover.runs r
                        where r.tenant_id = c.tenant_id and r.source = c.source and r.source_account = c.source_account
                          and r.status in ${runStatusIn(LIVE_RUN_STATUSES)})
     order by remove_after limit 10`);
  let removed = 0;
  for (const c of due) {
    // Where the last batch ended, read once; each batch then starts there on the slot index.
    const [at] = await db.execute<{ kind: string | null; source_id: string | null }>(sql`
      select removed_through_kind as kind, removed_through_source_id as source_id
        from drover.migration_closures
       where tenant_id = ${c.tenant_id} and source = ${c.source} and source_account = ${c.source_account}`);
    let position = at?.kind != null ? { kind: at.kind, sourceId: at.source_id ?? "" } : undefined;
    for (;;) {
      // Keyset order on the ledger's own slot index (tenant, source, account, kind, source id),
      // from where the last batch ended, the position given as values so the index scan starts
      // there: a batch never walks over the index entries of rows already removed (dead until
      // vacuum). Deleting "the first 5,000 rows" instead made each batch slower than the last:
      // from 300,000 rows a second to 11,000 over 20 million.
      const after = position
        ? sql`and (l.kind, l.source_id) > (${position.kind}, ${position.sourceId})`
        : sql``;
      const [gone] = await db.execute<{ n: number; kind: string | null; source_id: string | null }>(sql`
        with doomed as (
          select l.id, l.kind, l.source_id from drover.ledger l
           where l.tenant_id = ${c.tenant_id} and l.source = ${c.source} and l.source_account = ${c.source_account}
             ${after}
           order by l.kind, l.source_id
           limit ${batch}),
        removed as (
          delete from drover.ledger l using doomed where l.id = doomed.id
          returning doomed.kind, doomed.source_id),
        last as (select kind, source_id from removed order by kind desc, source_id desc limit 1),
        moved as (
          update drover.migration_closures c
             set removed_through_kind = last.kind, removed_through_source_id = last.source_id
            from last
           where c.tenant_id = ${c.tenant_id} and c.source = ${c.source} and c.source_account = ${c.source_account})
        select (select count(*)::int from removed) as n, last.kind, last.source_id
          from (select 1) one left join last on true`);
      if (gone?.kind != null) position = { kind: gone.kind, sourceId: gone.source_id ?? "" };
      removed += gone?.n ?? 0;
      if ((gone?.n ?? 0) < batch) break;
      // At least one batch a pass; the next pass goes on where this one stopped.
      if (Date.now() >= until) return removed;
    }
    await db.execute(sql`
      update drover.migration_closures set removed_at = now()
       where tenant_id = ${c.tenant_id} and source = ${c.source} and source_account = ${c.source_account}
         and removed_at is null`);
  }
  return removed;
}

function closureRow(row: Record<string, unknown>): MigrationClosureRow {
  const at = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string));
  return {
    tenantId: row.tenant_id as string,
    source: row.source as string,
    sourceAccount: row.source_account as string,
    closedAt: at(row.closed_at)!,
    removeAfter: at(row.remove_after)!,
    removedAt: at(row.removed_at),
    removedThroughKind: (row.removed_through_kind as string | null) ?? null,
    removedThroughSourceId: (row.removed_through_source_id as string | null) ?? null,
  };
}
