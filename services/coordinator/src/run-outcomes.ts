import type { Queryable, RunRow } from "@drover/db";
import type { Provider } from "@drover/provider-sdk";
import { type SQL, sql } from "drizzle-orm";

/** What one kind's source rows came to in a run, each row counted once, in its final outcome. */
export interface KindOutcome {
  created: bigint;
  matched: bigint;
  alreadyHere: bigint;
  skipped: bigint;
  failed: bigint;
}

type RunScope = Pick<
  RunRow,
  "id" | "tenantId" | "source" | "sourceAccount" | "plan" | "currentPhase" | "status" | "dryRun"
>;

/**
 * What the run view needs to know of a run's source: whether it keeps a ledger, which passes
 * revisit (the counts), what work is left (the ETA), and the daily reset its settings state.
 */
export type SourceTraits = Pick<Provider, "ledger" | "closingKinds" | "estimateWork" | "dailyResetTimeZone">;

/** The coordinator's sources by name (its `providers`), for what the counts read of them. */
export type Sources = ReadonlyMap<string, SourceTraits>;

/**
 * Whether a note of the run can have stopped holding: only once a pass wrote its row again, which
 * is the closing pass (the crm catch-up) or a later run, and a later run of the same tenant and
 * source cannot exist while this one is live (one live run per tenant and source). Before that no
 * note is probed, so a live run's counts and reasons cost no ledger lookup per note (measured: ~9 µs
 * a probe on a loaded two-core machine, 0.45 s for 50,000 failed rows, every WatchRun poll).
 */
function notesMayBeStale(sources: Sources, run: RunScope): boolean {
  // A dry run wrote no ledger slot: its notes are what it would note, whatever the ledger does since.
  if (run.dryRun) return false;
  if (run.status === "stopped" || run.status === "succeeded" || run.status === "failed") return true;
  const closing = sources.get(run.source)?.closingKinds ?? [];
  const revisit = run.plan.findIndex((group) => group.some((k) => closing.includes(k)));
  return revisit >= 0 && run.currentPhase >= revisit;
}

/**
 * A note about a source row no longer holds once the row's ledger slot was written after it (for a
 * source without a ledger: once a re-drive's window wrote the row, `settled_at`): a row
 * skipped as "not linked to any record" (or failed) that a later pass created, matched or skipped
 * again. A note written with the slot, or about a row whose slot has not moved since (a deferred
 * link kept as a source reference, a row of an earlier run that failed now), still holds.
 * `n` is the note's alias; one probe of the ledger's unique index per note.
 */
export function noteHolds(sources: Sources, run: RunScope, n: SQL): SQL {
  // Without a ledger, the window that writes a row again settles the notes about it (re-drive).
  if ((sources.get(run.source)?.ledger ?? "per-row") === "none") return sql`${n}.settled_at is null`;
  if (!notesMayBeStale(sources, run)) return sql`true`;
  return sql`(${n}.subject_id is null or not exists (
    select 1 from drover.ledger l
     where l.tenant_id = ${run.tenantId} and l.source = ${run.source} and l.source_account = ${run.sourceAccount}
       and l.kind = ${n}.kind and l.source_id = ${n}.subject_id and l.updated_at > ${n}.created_at))`;
}

/**
 * Per kind, each source row the run read once, in what it finally became. The tasks' stats count
 * what each task did, so a row two tasks touched was counted twice: skipped by the first pass and
 * created by the catch-up, or imported and then "already here" when the catch-up applied its edit.
 * So:
 * - created and matched are the tasks' sums: those ledger slots are exclusive, claimed once ever,
 *   and counted in the transaction that claims them;
 * - skipped is the ledger's count of slots this run holds as skipped (a skipped slot is a
 *   placeholder another pass takes over); a source without a ledger sums its tasks' skips;
 * - already here counts only first passes over a kind (a task whose kind belongs to its own phase):
 *   a closing pass (the crm catch-up) revisits rows the run already counted, imported or already here.
 *   Two gaps remain, both needing a record of each row a run read: a crm run with `partitions` > 1
 *   reads a row edited after it started in the catch-up only, so an earlier run's row edited then
 *   is not counted; a row a first pass lists twice (a v1 page shifted by a deletion) counts twice;
 * - failed counts the distinct rows with an error note that still holds (noteHolds): a row that
 *   failed and was later written is counted as what it became.
 * Every read is index-backed and none scans the ledger: the task rows of the run, the ledger's
 * (run_id, kind, action) index for skipped slots only, the run's error notes with one unique-index
 * probe each.
 */
export async function kindOutcomes(
  q: Queryable,
  sources: Sources,
  run: RunScope,
): Promise<Map<string, KindOutcome>> {
  const ledger = sources.get(run.source)?.ledger ?? "per-row";
  const kinds = [...new Set(run.plan.flat())];
  const rows = await q.execute<{
    kind: string;
    created: string;
    matched: string;
    already_here: string;
    task_skipped: string;
    ledger_skipped: string;
    failed: string;
  }>(sql`
    with task_counts as (
      select t.kind,
             coalesce(sum((t.stats ->> 'created')::bigint), 0) as created,
             coalesce(sum((t.stats ->> 'matched')::bigint), 0) as matched,
             coalesce(sum((t.stats ->> 'skipped')::bigint), 0) as skipped,
             coalesce(sum((t.stats ->> 'already_here')::bigint)
                        filter (where ${JSON.stringify(run.plan)}::jsonb -> t.phase @> to_jsonb(t.kind)), 0) as already_here
        from drover.tasks t where t.run_id = ${run.id}::uuid group by t.kind),
    skipped_slots as (
      select l.kind, count(*) as n from drover.ledger l
       where l.run_id = ${run.id}::uuid and l.kind = any(${sql.param(kinds)}::text[]) and l.action = 'skipped'
       group by l.kind),
    failed_rows as (
      select n.kind, count(distinct n.subject_id) as n from drover.notes n
       where n.run_id = ${run.id}::uuid and n.level = 'error' and n.subject_id is not null
         and ${noteHolds(sources, run, sql`n`)}
       group by n.kind)
    select k.kind,
           coalesce(t.created, 0) as created, coalesce(t.matched, 0) as matched,
           coalesce(t.already_here, 0) as already_here, coalesce(t.skipped, 0) as task_skipped,
           coalesce(s.n, 0) as ledger_skipped, coalesce(f.n, 0) as failed
      from unnest(${sql.param(kinds)}::text[]) as k(kind)
      left join task_counts t on t.kind = k.kind
      left join skipped_slots s on s.kind = k.kind
      left join failed_rows f on f.kind = k.kind`);
  return new Map(
    rows.map((r) => [
      r.kind,
      {
        created: BigInt(r.created),
        matched: BigInt(r.matched),
        alreadyHere: BigInt(r.already_here),
        // A dry run holds no ledger slot: what its tasks would have skipped is its count.
        skipped: BigInt(ledger === "none" || run.dryRun ? r.task_skipped : r.ledger_skipped),
        failed: BigInt(r.failed),
      },
    ]),
  );
}

export interface NoteGroupFilter {
  kind?: string;
  level?: "error" | "warn" | "info";
  /** Sample subject ids per group. */
  samples: number;
}

export interface CurrentNoteGroup {
  level: string;
  kind: string;
  reason: string;
  /** Source rows the reason holds for now (a note without a subject counts once). */
  count: bigint;
  sampleSubjectIds: string[];
}

/**
 * The run's grouped reasons as they stand: notes that no longer hold (noteHolds: the row was
 * written since) are left out, and a row noted twice for one reason counts once, so a group's count
 * agrees with the row counts GetRun shows. Biggest groups first, at most 500.
 */
export async function currentNoteGroups(
  q: Queryable,
  sources: Sources,
  run: RunScope,
  filter: NoteGroupFilter,
): Promise<CurrentNoteGroup[]> {
  const groups = await q.execute<{
    level: string;
    kind: string;
    reason: string;
    count: string;
    samples: string[] | null;
  }>(sql`
    select n.level, n.kind, n.reason,
           count(distinct coalesce(n.subject_id, '#' || n.id)) as count,
           (array_agg(distinct n.subject_id) filter (where n.subject_id is not null))[1:${filter.samples}] as samples
      from drover.notes n
     where n.run_id = ${run.id}::uuid
       ${filter.kind ? sql`and n.kind = ${filter.kind}` : sql``}
       ${filter.level ? sql`and n.level = ${filter.level}` : sql``}
       and ${noteHolds(sources, run, sql`n`)}
     group by n.level, n.kind, n.reason
     order by count desc, n.level, n.kind, n.reason
     limit 500`);
  return groups.map((g) => ({
    level: g.level,
    kind: g.kind,
    reason: g.reason,
    count: BigInt(g.count),
    sampleSubjectIds: g.samples ?? [],
  }));
}
