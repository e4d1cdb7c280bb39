import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";
import type { LedgerScope } from "./ledger-claim.js";

/** A source row the ledger already holds: a created or matched slot, and the record it points at. */
export interface HeldSlot {
  action: "created" | "matched";
  recordType: string | null;
  recordId: number;
}

/**
 * Which of these source rows of one kind the ledger already holds, in one statement (an index probe
 * per id on ledger_source_row). Only created and matched slots are held: they are exclusive, so a
 * write for such a row could only lose its claim and be undone. A skipped slot is not held: a later
 * attempt that does better takes it over (claimLedgerSlot's ON CONFLICT rule).
 */
export async function heldSlots(
  q: Queryable,
  scope: LedgerScope,
  kind: string,
  sourceIds: readonly string[],
): Promise<Map<string, HeldSlot>> {
  const held = new Map<string, HeldSlot>();
  if (sourceIds.length === 0) return held;
  const rows = await q.execute<{
    source_id: string;
    action: "created" | "matched";
    record_type: string | null;
    record_id: string | number;
  }>(sql`
    select l.source_id, l.action, l.record_type, l.record_id
      from drover.ledger l
     where l.tenant_id = ${scope.tenantId} and l.source = ${scope.source}
       and l.source_account = ${scope.sourceAccount} and l.kind = ${kind}
       and l.source_id = any(${sql.param([...new Set(sourceIds)])}::text[])
       and l.action in ('created', 'matched') and l.record_id is not null`);
  for (const r of rows)
    held.set(r.source_id, { action: r.action, recordType: r.record_type, recordId: Number(r.record_id) });
  return held;
}
