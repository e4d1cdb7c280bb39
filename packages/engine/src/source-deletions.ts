import type { Db, Queryable } from "@drover/db";
import type { ProductRecords, RunInfo, SourceDeletions } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { appendNotes, type NoteInput } from "./notes.js";
import { writeCheckpoint } from "./task-transitions.js";
import { destinationWindow, WINDOW_DEADLINE_MS } from "./window-transaction.js";

/**
 * Deletions at the source that no list reports (a follow pass's sweep, crm provider): the ledger
 * says which source rows the tenant holds from this source account, the provider finds which of
 * them the source deleted (or restored), and this applies that as the ledger's ownership rules say:
 * a record Drover created is marked deleted in the product (deleted_at), a record it matched
 * belongs to someone else and is only noted (invariant 8). The ledger row keeps its slot, with
 * source_deleted_at set, so a later pass neither applies it again nor counts it twice.
 */

/** The tenant's held source rows of `kind` from the run's source account, and which were found deleted. */
export async function heldSourceRows(
  q: Queryable,
  run: Pick<RunInfo, "tenantId" | "source" | "sourceAccount">,
  kind: string,
): Promise<{ sourceId: string; deleted: boolean }[]> {
  const rows = await q.execute<{ source_id: string; deleted: boolean }>(sql`
    select source_id, source_deleted_at is not null as deleted from drover.ledger
     where tenant_id = ${run.tenantId} and source = ${run.source} and source_account = ${run.sourceAccount}
       and kind = ${kind} and action in ('created', 'matched')`);
  return rows.map((r) => ({ sourceId: r.source_id, deleted: r.deleted }));
}

/** heldSourceRows counted in the database: a quiet follow pass reads no row. */
export async function heldSourceCounts(
  q: Queryable,
  run: Pick<RunInfo, "tenantId" | "source" | "sourceAccount">,
  kind: string,
): Promise<{ held: number; deleted: number }> {
  const [row] = await q.execute<{ held: number; deleted: number }>(sql`
    select count(*)::int as held, count(source_deleted_at)::int as deleted from drover.ledger
     where tenant_id = ${run.tenantId} and source = ${run.source} and source_account = ${run.sourceAccount}
       and kind = ${kind} and action in ('created', 'matched')`);
  return { held: row?.held ?? 0, deleted: row?.deleted ?? 0 };
}

export interface ApplyDeletionsDeps {
  db: Db;
  run: Pick<RunInfo, "id" | "tenantId" | "source" | "sourceAccount">;
  taskId: number;
  claimToken: string;
  notesCap: number;
  records: ProductRecords | undefined;
  windowDeadlineMs?: number | undefined;
  /** How long the run parks when the destination holds a window past its limit (DESTINATION_PROBE_MS). */
  destinationProbeMs?: number | undefined;
  /** The attempt's source calls since its last checkpoint, counted with this one. */
  takeSourceCalls(): Record<string, number>;
}

/**
 * Applies one kind's deletions and restorations with the task's checkpoint, in one transaction
 * fenced by the claim: a killed attempt applies nothing and its successor finds the same rows
 * again; a row already marked is not marked (or counted) twice. Returns what this call changed.
 */
export async function applySourceDeletions(
  deps: ApplyDeletionsDeps,
  kind: string,
  change: SourceDeletions,
  cursor: Record<string, unknown>,
): Promise<{ deleted: number; restored: number }> {
  const { run } = deps;
  return destinationWindow(
    deps.db,
    { deadlineMs: deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, probeMs: deps.destinationProbeMs },
    async (tx) => {
      const mark = async (ids: readonly string[], deleted: boolean) => {
        if (ids.length === 0) return [];
        return tx.execute<{
          source_id: string;
          action: string;
          record_type: string | null;
          record_id: string | null;
        }>(sql`
        update drover.ledger
           set source_deleted_at = ${deleted ? sql`now()` : sql`null`}, updated_at = now()
         where tenant_id = ${run.tenantId} and source = ${run.source} and source_account = ${run.sourceAccount}
           and kind = ${kind} and source_id = any(${sql.param([...ids])}::text[])
           and action in ('created', 'matched')
           and source_deleted_at is ${deleted ? sql`null` : sql`not null`}
        returning source_id, action, record_type, record_id::text as record_id`);
      };
      const gone = await mark(change.gone, true);
      const back = await mark(change.restored, false);
      // Only Drover's own records are marked (or unmarked); a matched one keeps what its owner made it.
      for (const [rows, deleted] of [
        [gone, true],
        [back, false],
      ] as const) {
        const byTable = new Map<string, string[]>();
        for (const r of rows) {
          const table = r.record_type ? deps.records?.tables[r.record_type] : undefined;
          if (r.action !== "created" || !table || r.record_id === null) continue;
          byTable.set(table, [...(byTable.get(table) ?? []), r.record_id]);
        }
        for (const [table, ids] of byTable)
          await tx.execute(sql`
          update ${sql.raw(table)} set deleted_at = ${deleted ? sql`now()` : sql`null`}, updated_at = now()
           where tenant_id = ${run.tenantId} and id = any(${sql.param(ids)}::bigint[])`);
      }
      const notes: NoteInput[] = [
        ...gone.map((r) => ({
          level: "info" as const,
          kind,
          subjectId: r.source_id,
          reason:
            r.action === "created"
              ? "deleted at the source: its record marked deleted"
              : "deleted at the source: the matched record is not Drover's and was left as it was",
        })),
        ...back.map((r) => ({
          level: "info" as const,
          kind,
          subjectId: r.source_id,
          reason: "restored at the source: listed again, its deletion undone",
        })),
      ];
      await appendNotes(tx, run.id, deps.taskId, notes, deps.notesCap);
      await writeCheckpoint(tx, deps.taskId, deps.claimToken, {
        processedOffset: 0,
        cursor,
        statsDelta: { ...deps.takeSourceCalls(), deleted: gone.length, restored: back.length },
      });
      return { deleted: gone.length, restored: back.length };
    },
  );
}
