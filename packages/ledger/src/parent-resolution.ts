import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";
import type { LedgerScope } from "./ledger-claim.js";

export interface ParentMap {
  get(kind: string, sourceId: string | null | undefined): number | undefined;
  readonly size: number;
}

/**
 * Resolves source ids to local record ids through the ledger: one query for a whole page, whatever
 * the number of parent kinds. Only created or matched slots resolve; a skipped parent has no record.
 */
export async function resolveParents(
  q: Queryable,
  scope: LedgerScope,
  wanted: Readonly<Record<string, readonly string[]>>,
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
  if (ids.length > 0) {
    const rows = await q.execute<{ kind: string; source_id: string; record_id: string | number }>(sql`
      select l.kind, l.source_id, l.record_id
      from unnest(${sql.param(kinds)}::text[], ${sql.param(ids)}::text[]) as w(kind, source_id)
      join drover.ledger l
        on l.tenant_id = ${scope.tenantId} and l.source = ${scope.source}
       and l.source_account = ${scope.sourceAccount} and l.kind = w.kind and l.source_id = w.source_id
      where l.action in ('created', 'matched') and l.record_id is not null`);
    for (const r of rows) found.set(`${r.kind}\u0000${r.source_id}`, Number(r.record_id));
  }
  return {
    size: found.size,
    get(kind, sourceId) {
      if (sourceId === null || sourceId === undefined || sourceId === "") return undefined;
      return found.get(`${kind}\u0000${sourceId}`);
    },
  };
}
