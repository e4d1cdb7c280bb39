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

/** One row of a window's claim; the scope and run are the window's. */
export type LedgerSlotClaim = Omit<LedgerClaim, keyof LedgerScope | "runId" | "taskId">;

/**
 * Claims the slots of a whole window in one statement, with exactly claimLedgerSlot's ON CONFLICT
 * rule (created/matched exclusive, skipped taken over). Call it in the transaction that wrote the
 * window's records, after the write. Returns the source ids this caller now owns: a row missing from
 * it found its slot taken, and its write must be undone (the window writer rolls the window back
 * and writes it again row by row, where each row has a savepoint of its own to undo).
 * Source ids must be distinct within one call: ON CONFLICT cannot touch a row twice in one statement.
 */
export async function claimLedgerSlots(
  q: Queryable,
  scope: LedgerScope & { runId: string; taskId?: number | null },
  claims: readonly LedgerSlotClaim[],
): Promise<Set<string>> {
  if (claims.length === 0) return new Set();
  const rows = await q.execute<{ source_id: string }>(sql`
    insert into drover.ledger
      (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, reason, pending_refs, run_id, task_id)
    select ${scope.tenantId}, ${scope.source}, ${scope.sourceAccount}, c.kind, c.source_id, c.action,
           c.record_type, c.record_id, c.reason, c.pending_refs, ${scope.runId}::uuid, ${scope.taskId ?? null}::bigint
      from jsonb_to_recordset(${JSON.stringify(
        claims.map((c) => ({
          kind: c.kind,
          source_id: c.sourceId,
          action: c.action,
          record_type: c.recordType ?? null,
          record_id: c.recordId ?? null,
          reason: c.reason ?? null,
          pending_refs: c.pendingRefs ?? null,
        })),
      )}::jsonb)
        as c(kind text, source_id text, action text, record_type text, record_id bigint, reason text, pending_refs jsonb)
    on conflict (tenant_id, source, source_account, kind, source_id) do update set
      action = excluded.action, record_type = excluded.record_type, record_id = excluded.record_id,
      reason = excluded.reason, pending_refs = excluded.pending_refs, run_id = excluded.run_id,
      task_id = excluded.task_id, updated_at = now()
    where drover.ledger.action = 'skipped'
    returning source_id`);
  return new Set(rows.map((r) => r.source_id));
}
