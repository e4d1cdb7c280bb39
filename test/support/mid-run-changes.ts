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
