import type { Queryable, Tx } from "@drover/db";
import { sql } from "drizzle-orm";

/**
 * A dry run walks the source like a real run, on the same leased budget, and takes every decision
 * a real run would take in the same code (the window writer, the ledger claim, the provider's
 * writers): each window's writes and ledger claims run inside a savepoint that is rolled back once
 * their outcomes are counted. What commits is what a real run commits beside its rows: the task's
 * checkpoint and stats (would create, would match and by which rule, already here, would skip,
 * would fail), the notes (the same grouped reasons), and the rows it would have created or
 * matched (drover.dry_run_rows), so that later windows see the parents and shared emails a real
 * run would have written by then. Nothing reaches the product tables or the ledger.
 */

/** Stats key prefix of rows matched by a writer's rule: `matched_by:email`. */
export const MATCHED_BY = "matched_by:";
/** Stats key prefix of skipped rows by the parent kind they refer to and miss: `missing_parent:deals`. */
export const MISSING_PARENT = "missing_parent:";
/** A skipped row that refers to no parent at all. */
export const NO_PARENT = "none";

/** A row a dry run would have created or matched. */
export interface WouldBeRow {
  kind: string;
  sourceId: string;
  /** The key a later row would be matched on (a person's lower-cased email). */
  matchKey: string | null;
}

/** Thrown inside the dry savepoint once the window is counted, to undo everything it wrote. */
class DryRollback extends Error {}

/**
 * Runs a window's writes: as they are in a real run; in a dry run inside a savepoint that is
 * rolled back after `body` has counted their outcomes. Row errors and lost claims behave exactly as
 * in a real run (they are caught inside body); anything else still ends the window.
 */
export async function rolledBackInDryRun(
  tx: Tx,
  run: { dryRun?: boolean | undefined },
  body: (tx: Tx) => Promise<void>,
): Promise<void> {
  if (!run.dryRun) return body(tx);
  try {
    await tx.transaction(async (dry) => {
      await body(dry);
      throw new DryRollback();
    });
  } catch (err) {
    if (!(err instanceof DryRollback)) throw err;
  }
}

/** Records, in the window's transaction, the rows it would have written. */
export async function recordWouldBeRows(
  q: Queryable,
  runId: string,
  rows: readonly WouldBeRow[],
): Promise<void> {
  if (rows.length === 0) return;
  await q.execute(sql`
    insert into drover.dry_run_rows (run_id, kind, source_id, match_key)
    select ${runId}::uuid, k, s, m
      from unnest(${sql.param(rows.map((r) => r.kind))}::text[],
                  ${sql.param(rows.map((r) => r.sourceId))}::text[],
                  ${sql.param(rows.map((r) => r.matchKey))}::text[]) as w(k, s, m)
    on conflict do nothing`);
}

/** Which of these rows of one kind an earlier window of the dry run would have written. */
export async function wouldBeRows(
  q: Queryable,
  runId: string,
  kind: string,
  sourceIds: readonly string[],
): Promise<Set<string>> {
  if (sourceIds.length === 0) return new Set();
  const rows = await q.execute<{ source_id: string }>(sql`
    select source_id from drover.dry_run_rows
     where run_id = ${runId}::uuid and kind = ${kind} and source_id = any(${sql.param([...new Set(sourceIds)])}::text[])`);
  return new Set(rows.map((r) => r.source_id));
}
