import type { Db } from "@drover/db";
import { sql } from "drizzle-orm";

/**
 * Where each crm kind lands, and the column the sandbox's mid-run change set edits (it appends
 * " (edited)" to it).
 */
export const CHANGED_COLUMN: Record<string, { table: string; label: string }> = {
  organizations: { table: "companies", label: "name" },
  persons: { table: "contacts", label: "name" },
  deals: { table: "deals", label: "title" },
  leads: { table: "leads", label: "title" },
  activities: { table: "activities", label: "subject" },
  notes: { table: "notes", label: "content" },
};

/** A kind's share of the sandbox's truth that the change set touched. */
export interface ChangeTruth {
  malformed: string[];
  edited: string[];
  added: string[];
}

/**
 * What the customer changed during the run, checked in the destination: every edited row that was
 * imported carries its edit on the record its ledger row points at, and every added row reached the
 * ledger. A row the run skipped (a note linked to nothing) has no record to carry anything; a row it
 * matched points at a record that is not Drover's, which keeps its own values. Returns
 * one sentence per problem; none when everything landed.
 */
export async function midRunChangeProblems(
  db: Db,
  scope: { tenantId: string; sourceAccount: string },
  truth: Readonly<Record<string, ChangeTruth>>,
  kinds: readonly string[],
): Promise<string[]> {
  const problems: string[] = [];
  for (const kind of kinds) {
    const { table, label } = CHANGED_COLUMN[kind]!;
    const t = truth[kind]!;
    const rows = await db.execute<{ source_id: string; action: string; label: string | null }>(sql`
      select l.source_id, l.action, d.${sql.identifier(label)}::text as label
        from drover.ledger l left join ${sql.identifier("app")}.${sql.identifier(table)} d on d.id = l.record_id
       where l.tenant_id = ${scope.tenantId} and l.source = 'crm' and l.source_account = ${scope.sourceAccount}
         and l.kind = ${kind}`);
    const byId = new Map(rows.map((r) => [r.source_id, r]));
    for (const id of t.edited.filter((e) => !t.malformed.includes(e))) {
      const entry = byId.get(id);
      // A matched record is not Drover's: the catch-up only fills what is empty there (invariant 8).
      if (entry?.action !== "created") continue;
      if (!String(entry.label).endsWith(" (edited)"))
        problems.push(`${kind} ${id}: the record holds "${entry.label}", not the mid-run edit`);
    }
    for (const id of t.added.filter((e) => !t.malformed.includes(e)))
      if (!byId.has(id)) problems.push(`${kind} ${id}: added mid-run, never reached the ledger`);
  }
  return problems;
}

/** A kind's share of the sandbox's truth that its change rounds deleted. */
export interface DeletionTruth {
  ids: string[];
  deleted: string[];
}

/**
 * Deals stay listed once deleted (with their status); every other kind's list drops the row, so a
 * row deleted before the run read it is one the run rightly never saw and owes no ledger row.
 */
const LISTED_WHEN_DELETED = new Set(["deals"]);

/**
 * The truth the ledger owes an account for: `truth` without the rows its rounds deleted before the
 * run could see them (not listed any more, and not in the ledger).
 */
export async function withoutUnseenDeletions<T extends DeletionTruth>(
  db: Db,
  scope: { tenantId: string; sourceAccount: string },
  truth: Readonly<Record<string, T>>,
): Promise<Record<string, T>> {
  const out: Record<string, T> = {};
  for (const [kind, t] of Object.entries(truth)) {
    if (LISTED_WHEN_DELETED.has(kind) || t.deleted.length === 0) {
      out[kind] = t;
      continue;
    }
    const held = await db.execute<{ source_id: string }>(sql`
      select source_id from drover.ledger
       where tenant_id = ${scope.tenantId} and source = 'crm' and source_account = ${scope.sourceAccount}
         and kind = ${kind} and source_id = any(${sql.param(t.deleted)}::text[])`);
    const seen = new Set(held.map((r) => r.source_id));
    const unseen = new Set(t.deleted.filter((id) => !seen.has(id)));
    out[kind] = { ...t, ids: t.ids.filter((id) => !unseen.has(id)) };
  }
  return out;
}

/**
 * Deletions at the source, applied as the ledger's rules say: a deal the source deleted is marked
 * deleted on its record (and no other deal is); a held row of another kind that the source deleted
 * has its ledger row marked, and its record too when Drover created it (a matched record is not
 * Drover's to mark); nothing else is marked. Returns one sentence per problem, and how many held
 * rows the source deleted.
 */
export async function sourceDeletionProblems(
  db: Db,
  scope: { tenantId: string; sourceAccount: string },
  truth: Readonly<Record<string, DeletionTruth>>,
): Promise<{ problems: string[]; heldGone: number }> {
  const problems: string[] = [];
  const deals = await db.execute<{ source_id: string; status: string }>(sql`
    select l.source_id, d.status from drover.ledger l join app.deals d on d.id = l.record_id
     where l.tenant_id = ${scope.tenantId} and l.source = 'crm' and l.source_account = ${scope.sourceAccount}
       and l.kind = 'deals' and l.action = 'created'`);
  const deletedDeals = new Set(truth.deals?.deleted ?? []);
  for (const d of deals) {
    if (deletedDeals.has(d.source_id) && d.status !== "deleted")
      problems.push(`deals ${d.source_id}: deleted at the source, not marked deleted`);
    if (!deletedDeals.has(d.source_id) && d.status === "deleted")
      problems.push(`deals ${d.source_id}: marked deleted, but the source still has it`);
  }
  let heldGone = 0;
  for (const [kind, { table }] of Object.entries(CHANGED_COLUMN)) {
    if (LISTED_WHEN_DELETED.has(kind) || !truth[kind]) continue;
    const gone = new Set(truth[kind].deleted);
    const rows = await db.execute<{
      source_id: string;
      action: string;
      source_deleted: boolean;
      record_deleted: boolean | null;
    }>(sql`
      select l.source_id, l.action, l.source_deleted_at is not null as source_deleted,
             d.deleted_at is not null as record_deleted
        from drover.ledger l left join ${sql.identifier("app")}.${sql.identifier(table)} d on d.id = l.record_id
       where l.tenant_id = ${scope.tenantId} and l.source = 'crm' and l.source_account = ${scope.sourceAccount}
         and l.kind = ${kind} and l.action in ('created', 'matched')`);
    for (const r of rows) {
      const wrong =
        r.source_deleted !== gone.has(r.source_id) ||
        (r.action === "created" && r.record_deleted !== gone.has(r.source_id)) ||
        (r.action === "matched" && r.record_deleted === true);
      if (wrong)
        problems.push(
          `${kind} ${r.source_id}: deletion at the source applied wrongly (${r.action}, source deleted ${r.source_deleted}, record deleted ${r.record_deleted})`,
        );
    }
    heldGone += rows.filter((r) => gone.has(r.source_id)).length;
  }
  return { problems, heldGone };
}
