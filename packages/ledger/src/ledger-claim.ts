import type { LedgerAction, Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

/** Which tenant's ledger, for which source account. */
export interface LedgerScope {
  tenantId: string;
  source: string;
  sourceAccount: string;
}

export interface LedgerClaim extends LedgerScope {
  kind: string;
  sourceId: string;
  action: LedgerAction;
  recordType?: string | null;
  recordId?: number | null;
  reason?: string | null;
  pendingRefs?: Record<string, string> | null;
  runId: string;
  taskId?: number | null;
}

/**
 * Claims the write-once ledger slot of one source row. Call it inside the savepoint that wrote the
 * destination record, after the write, so a write that raises leaves no claim behind.
 *
 * The ON CONFLICT clause is the whole contract:
 * - a slot that is created or matched is exclusive: a second writer (another run, an overlapping
 *   worker, a retried page) gets no row back, must roll back its own write, and reports "already here";
 * - a skipped slot is a placeholder: a later attempt takes it over, whatever it does.
 *
 * Returns true when this caller now owns the slot.
 */
export async function claimLedgerSlot(q: Queryable, c: LedgerClaim): Promise<boolean> {
  const rows = await q.execute(sql`
    insert into drover.ledger
      (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, reason, pending_refs, run_id, task_id)
    values
      (${c.tenantId}, ${c.source}, ${c.sourceAccount}, ${c.kind}, ${c.sourceId}, ${c.action},
       ${c.recordType ?? null}, ${c.recordId ?? null}, ${c.reason ?? null},
       ${c.pendingRefs ? JSON.stringify(c.pendingRefs) : null}::jsonb, ${c.runId}::uuid, ${c.taskId ?? null})
    on conflict (tenant_id, source, source_account, kind, source_id) do update set
      action = excluded.action, record_type = excluded.record_type, record_id = excluded.record_id,
      reason = excluded.reason, pending_refs = excluded.pending_refs, run_id = excluded.run_id,
      task_id = excluded.task_id, updated_at = now()
    where drover.ledger.action = 'skipped'
    returning id`);
  return rows.length === 1;
}
