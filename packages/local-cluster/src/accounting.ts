import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

/** What the source says a perfect import holds, per kind (the sandbox's truth, or a provider's counts). */
export interface KindTruth {
  ids: readonly string[];
  /** Rows the source serves malformed: each must end failed, with a reason. */
  malformed?: readonly string[];
}

export interface KindAccount {
  kind: string;
  sourceCount: number;
  created: number;
  matched: number;
  skipped: number;
  /** Source rows with no ledger row but an error note: failed, with a reason. */
  failed: number;
  /** Source rows neither in the ledger nor noted as failed. Must be empty. */
  lost: string[];
  /** Ledger rows for ids the source does not have. Must be empty. */
  unexpected: string[];
  /** Destination records claimed by more than one ledger row, or written after the run began without a ledger row. */
  duplicated: number;
  /** Malformed source rows that did not end failed. Must be empty. */
  malformedNotFailed: string[];
}

export interface AccountingScope {
  tenantId: string;
  source: string;
  sourceAccount: string;
  /** Destination records created at or after this instant must each be claimed by one ledger row. */
  since: Date;
}

/** The destination table each crm kind writes to. */
export const CRM_TABLES: Readonly<Record<string, string>> = {
  organizations: "companies",
  persons: "contacts",
  deals: "deals",
  leads: "leads",
  activities: "activities",
  notes: "notes",
  mail: "emails",
};

/**
 * The destination table each HubSpot kind writes to. An email without a deal is an activity: the
 * activities table is checked for it through the calls' entry (by record type, not kind).
 */
export const HUBSPOT_TABLES: Readonly<Record<string, string>> = {
  companies: "companies",
  contacts: "contacts",
  deals: "deals",
  notes: "notes",
  calls: "activities",
  tasks: "activities",
  meetings: "activities",
  emails: "emails",
};

/**
 * The checker of invariants 1 and 2, in the manner of Jepsen's queue checker: every source row is
 * in the ledger or noted as failed (nothing lost), the ledger holds nothing the source lacks, and no
 * destination record exists twice for one source row.
 */
export async function accountFor(
  q: Queryable,
  scope: AccountingScope,
  truth: Readonly<Record<string, KindTruth>>,
  tables: Readonly<Record<string, string>> = CRM_TABLES,
): Promise<KindAccount[]> {
  const out: KindAccount[] = [];
  for (const [kind, t] of Object.entries(truth)) {
    const ledgerRows = await q.execute<{ source_id: string; action: string }>(sql`
      select source_id, action from drover.ledger
       where tenant_id = ${scope.tenantId} and source = ${scope.source} and source_account = ${scope.sourceAccount}
         and kind = ${kind}`);
    const failedRows = await q.execute<{ subject_id: string }>(sql`
      select distinct n.subject_id from drover.notes n join drover.runs r on r.id = n.run_id
       where r.tenant_id = ${scope.tenantId} and r.source = ${scope.source} and r.source_account = ${scope.sourceAccount}
         and n.kind = ${kind} and n.level = 'error' and n.subject_id is not null`);
    const inLedger = new Map(ledgerRows.map((r) => [r.source_id, r.action]));
    const noted = new Set(failedRows.map((r) => r.subject_id));
    const source = new Set(t.ids);
    const lost = t.ids.filter((id) => !inLedger.has(id) && !noted.has(id));
    const unexpected = [...inLedger.keys()].filter((id) => !source.has(id));
    const failed = t.ids.filter((id) => !inLedger.has(id) && noted.has(id)).length;
    const malformedNotFailed = (t.malformed ?? []).filter((id) => inLedger.has(id) || !noted.has(id));

    const table = tables[kind];
    let duplicated = 0;
    if (table) {
      const target = sql`${sql.identifier("app")}.${sql.identifier(table)}`;
      // By record type, not kind: a table may be written by several kinds (HubSpot's calls, tasks
      // and meetings are all activities), and a kind may write two tables (a HubSpot email).
      const recordType = table.replace(/ies$/, "y").replace(/s$/, "");
      const [dup] = await q.execute<{ shared: string; unclaimed: string }>(sql`
        select
          (select count(*) from (select record_id from drover.ledger
                                   where tenant_id = ${scope.tenantId} and source = ${scope.source}
                                     and source_account = ${scope.sourceAccount} and kind = ${kind} and action = 'created'
                                   group by record_type, record_id having count(*) > 1) s) as shared,
          (select count(*) from ${target} d
            where d.tenant_id = ${scope.tenantId} and d.created_at >= ${scope.since.toISOString()}::timestamptz
              and not exists (select 1 from drover.ledger l
                               where l.tenant_id = d.tenant_id and l.record_type = ${recordType} and l.record_id = d.id
                                 and l.action in ('created', 'matched'))) as unclaimed`);
      duplicated = Number(dup?.shared ?? 0) + Number(dup?.unclaimed ?? 0);
    }
    const count = (action: string) => [...inLedger.values()].filter((a) => a === action).length;
    out.push({
      kind,
      sourceCount: t.ids.length,
      created: count("created"),
      matched: count("matched"),
      skipped: count("skipped"),
      failed,
      lost,
      unexpected,
      duplicated,
      malformedNotFailed,
    });
  }
  return out;
}

/**
 * What is wrong with the accounting, one line per kind and problem. A source row with neither a
 * ledger row nor a failure note is lost only once the run has ended: while it has not (a deadline
 * passed mid-run), the run simply did not reach it yet, and saying "lost" would be a false alarm.
 */
export function accountingProblems(
  accounts: readonly KindAccount[],
  options: { runEnded?: boolean } = {},
): string[] {
  const runEnded = options.runEnded ?? true;
  const problems: string[] = [];
  const sample = (ids: readonly string[]) =>
    `${ids.slice(0, 10).join(", ")}${ids.length > 10 ? ", ..." : ""}`;
  for (const a of accounts) {
    if (a.lost.length > 0)
      problems.push(
        runEnded
          ? `${a.kind}: ${a.lost.length} source row(s) lost: ${sample(a.lost)}`
          : `${a.kind}: ${a.lost.length} source row(s) not reached yet (the run did not end): ${sample(a.lost)}`,
      );
    if (a.unexpected.length > 0)
      problems.push(`${a.kind}: ${a.unexpected.length} unexpected ledger row(s): ${sample(a.unexpected)}`);
    if (a.duplicated > 0) problems.push(`${a.kind}: ${a.duplicated} duplicated destination record(s)`);
    if (a.malformedNotFailed.length > 0) {
      problems.push(
        `${a.kind}: ${a.malformedNotFailed.length} malformed row(s) not failed: ${sample(a.malformedNotFailed)}`,
      );
    }
  }
  return problems;
}
