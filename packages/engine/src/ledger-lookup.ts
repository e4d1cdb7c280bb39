import type { Queryable } from "@drover/db";
import { resolveParents } from "@drover/ledger";
import type { LedgerLookup, RunInfo } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";

/**
 * The ledger as a source may read it (LedgerLookup), scoped to the run's tenant, source and source
 * account: created or matched rows only. `q` is the caller's connection or transaction (a phase's
 * seeding reads inside the barrier's transaction).
 */
export function ledgerLookup(q: Queryable, run: RunInfo): LedgerLookup {
  return {
    heldSourceIds: (kind) => heldSourceIds(q, run, kind),
    heldCount: (kind) => heldCount(q, run, kind),
    recordIds: (wanted) => resolveParents(q, run, wanted),
    sourceIdsOfRecords: (kind, recordIds) => sourceIdsOfRecords(q, run, kind, recordIds),
    matchedRecordIds: (recordType, recordIds) => matchedRecordIds(q, run, recordType, recordIds),
    runRows: (kind, limit) => runRows(q, run, kind, limit),
  };
}

/**
 * Held source ids of `kind`; a dry run's deals are in the ledger only as it would have written them
 * (its windows were rolled back), so its would-be rows count as held.
 */
async function heldSourceIds(q: Queryable, run: RunInfo, kind: string): Promise<string[]> {
  const rows = await q.execute<{ source_id: string }>(sql`
    select source_id from drover.ledger
     where tenant_id = ${run.tenantId} and source = ${run.source} and source_account = ${run.sourceAccount}
       and kind = ${kind} and action in ('created', 'matched')
    union
    select source_id from drover.dry_run_rows
     where ${run.dryRun ? 1 : 0}::int = 1 and run_id = ${run.id}::uuid and kind = ${kind}`);
  return rows.map((r) => r.source_id);
}

async function heldCount(q: Queryable, run: RunInfo, kind: string): Promise<number> {
  const [row] = await q.execute<{ n: number }>(sql`
    select count(*)::int as n from drover.ledger
     where tenant_id = ${run.tenantId} and source = ${run.source} and source_account = ${run.sourceAccount}
       and kind = ${kind} and action in ('created', 'matched')`);
  return row?.n ?? 0;
}

async function sourceIdsOfRecords(
  q: Queryable,
  run: RunInfo,
  kind: string,
  recordIds: readonly string[],
): Promise<Map<string, string>> {
  if (recordIds.length === 0) return new Map();
  const rows = await q.execute<{ source_id: string; record_id: string }>(sql`
    select source_id, record_id::text as record_id from drover.ledger
     where tenant_id = ${run.tenantId} and source = ${run.source}
       and source_account = ${run.sourceAccount} and kind = ${kind}
       and action in ('created', 'matched') and record_id = any(${sql.param([...recordIds])}::bigint[])`);
  return new Map(rows.map((r) => [r.record_id, r.source_id]));
}

/** On the ledger's record index: the tenant's matched rows pointing at these records. */
async function matchedRecordIds(
  q: Queryable,
  run: RunInfo,
  recordType: string,
  recordIds: readonly string[],
): Promise<Set<string>> {
  if (recordIds.length === 0) return new Set();
  const rows = await q.execute<{ record_id: string }>(sql`
    select distinct record_id::text as record_id from drover.ledger
     where tenant_id = ${run.tenantId} and record_type = ${recordType} and action = 'matched'
       and record_id = any(${sql.param([...recordIds])}::bigint[])`);
  return new Set(rows.map((r) => r.record_id));
}

async function runRows(
  q: Queryable,
  run: RunInfo,
  kind: string,
  limit: number,
): Promise<{ rows: number; created: number; createdRecordIds: number[] }> {
  const [tally] = await q.execute<{ n: number; created: number }>(sql`
    select count(*)::int as n, count(*) filter (where action = 'created')::int as created
      from drover.ledger where run_id = ${run.id}::uuid and kind = ${kind}`);
  const ids =
    (tally?.created ?? 0) === 0
      ? []
      : await q.execute<{ record_id: string }>(sql`
          select record_id::text as record_id from drover.ledger
           where run_id = ${run.id}::uuid and kind = ${kind} and action = 'created' limit ${limit}`);
  return {
    rows: tally?.n ?? 0,
    created: tally?.created ?? 0,
    createdRecordIds: ids.map((r) => Number(r.record_id)),
  };
}
