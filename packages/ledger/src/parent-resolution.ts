import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";
import type { LedgerScope } from "./ledger-claim.js";

export interface ParentMap {
  get(kind: string, sourceId: string | null | undefined): number | undefined;
  /** A record exists, or (dry run) an earlier window of the run would have written one. */
  has(kind: string, sourceId: string | null | undefined): boolean;
  /** Set in a dry run: its would-be rows stand in for the ledger rows it did not write. */
  readonly dryRunId?: string | undefined;
  readonly size: number;
}

/**
 * Resolves source ids to local record ids through the ledger: one query for a whole page, whatever
 * the number of parent kinds. Only created or matched slots resolve; a skipped parent has no record.
 *
 * A dry run (`dryRunId`) also counts as present the parents its own earlier windows would have
 * created or matched (drover.dry_run_rows): a real run would have written them by then, so a row
 * linking to them would be linked, not skipped. They have no record id (their windows were rolled
 * back), so `get` stays undefined and only `has` says so; the row's write is rolled back too.
 */
export async function resolveParents(
  q: Queryable,
  scope: LedgerScope,
  wanted: Readonly<Record<string, readonly string[]>>,
  options: { dryRunId?: string | undefined } = {},
): Promise<ParentMap> {
  const kinds: string[] = [];
  const ids: string[] = [];
  for (const [kind, list] of Object.entries(wanted)) {
    for (const id of new Set(list)) {
      kinds.push(kind);
      ids.push(id);
    }
  }
  const found = new Map<string, number>();
  const wouldBe = new Set<string>();
  const key = (kind: string, sourceId: string) => `${kind}\u0000${sourceId}`;
  if (ids.length > 0) {
    // One probe of ledger_source_row per parent, whatever the planner knows of the ledger (see
    // heldRowsQuery): as a join, a ledger never analyzed since it grew was hashed whole, the
    // tenant's every row, for each page (80–135 ms a page at 24,500 rows).
    const rows = await q.execute<{ kind: string; source_id: string; record_id: string | number }>(sql`
      select w.kind, w.source_id, l.record_id
      from unnest(${sql.param(kinds)}::text[], ${sql.param(ids)}::text[]) as w(kind, source_id)
      cross join lateral (
        select l.record_id from drover.ledger l
         where l.tenant_id = ${scope.tenantId} and l.source = ${scope.source}
           and l.source_account = ${scope.sourceAccount} and l.kind = w.kind and l.source_id = w.source_id
           and l.action in ('created', 'matched') and l.record_id is not null
         limit 1) l`);
    for (const r of rows) found.set(key(r.kind, r.source_id), Number(r.record_id));
    if (options.dryRunId) {
      const dry = await q.execute<{ kind: string; source_id: string }>(sql`
        select d.kind, d.source_id
          from unnest(${sql.param(kinds)}::text[], ${sql.param(ids)}::text[]) as w(kind, source_id)
          join drover.dry_run_rows d
            on d.run_id = ${options.dryRunId}::uuid and d.kind = w.kind and d.source_id = w.source_id`);
      for (const r of dry) wouldBe.add(key(r.kind, r.source_id));
    }
  }
  const absent = (sourceId: string | null | undefined): sourceId is null | undefined | "" =>
    sourceId === null || sourceId === undefined || sourceId === "";
  return {
    size: found.size + wouldBe.size,
    dryRunId: options.dryRunId,
    get(kind, sourceId) {
      if (absent(sourceId)) return undefined;
      return found.get(key(kind, sourceId));
    },
    has(kind, sourceId) {
      if (absent(sourceId)) return false;
      return found.has(key(kind, sourceId)) || wouldBe.has(key(kind, sourceId));
    },
  };
}
