import type { Queryable } from "@drover/db";
import type { DeferredLink } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { appendNotes } from "./notes.js";

/**
 * Resolves references between kinds written in the same phase (a person points at an organization
 * imported alongside it). Rows record the reference's source id in the ledger's pending_refs when
 * the parent was not there yet; once the phase's barrier passes, every parent that will exist does,
 * and one set-based UPDATE per link fills the column. References still unresolved are kept as
 * source ids in a note, never silently dropped.
 */
export async function resolveDeferredLinks(
  q: Queryable,
  run: { id: string; tenantId: string; source: string; sourceAccount: string },
  phaseKinds: readonly string[],
  links: readonly DeferredLink[],
  notesCap: number,
): Promise<void> {
  for (const link of links) {
    if (!phaseKinds.includes(link.kind)) continue;
    const [schema, table] = link.table.includes(".") ? link.table.split(".", 2) : ["app", link.table];
    const target = sql`${sql.identifier(schema!)}.${sql.identifier(table!)}`;
    const column = sql.identifier(link.column);
    await q.execute(sql`
      update ${target} d set ${column} = p.record_id, updated_at = now()
        from drover.ledger l
        join drover.ledger p
          on p.tenant_id = l.tenant_id and p.source = l.source and p.source_account = l.source_account
         and p.kind = ${link.ref} and p.source_id = l.pending_refs ->> ${link.ref}
         and p.action in ('created', 'matched')
       where l.run_id = ${run.id}::uuid and l.kind = ${link.kind} and l.pending_refs ? ${link.ref}
         and l.action = 'created' and d.id = l.record_id and d.${column} is null`);
    const missing = await q.execute<{ source_id: string; ref_id: string }>(sql`
      select l.source_id, l.pending_refs ->> ${link.ref} as ref_id
        from drover.ledger l
       where l.run_id = ${run.id}::uuid and l.kind = ${link.kind} and l.pending_refs ? ${link.ref}
         and not exists (select 1 from drover.ledger p
                          where p.tenant_id = l.tenant_id and p.source = l.source and p.source_account = l.source_account
                            and p.kind = ${link.ref} and p.source_id = l.pending_refs ->> ${link.ref}
                            and p.action in ('created', 'matched'))`);
    await q.execute(sql`
      update drover.ledger l set pending_refs = nullif(l.pending_refs - ${link.ref}, '{}'::jsonb), updated_at = now()
       where l.run_id = ${run.id}::uuid and l.kind = ${link.kind} and l.pending_refs ? ${link.ref}`);
    await appendNotes(
      q,
      run.id,
      null,
      missing.map((r) => ({
        level: "warn" as const,
        kind: link.kind,
        subjectId: r.source_id,
        reason: `${link.ref} ${r.ref_id} is not in the destination; kept as a source reference only`,
      })),
      notesCap,
    );
  }
}
