import type { Queryable, RunRow } from "@drover/db";
import { Code, type RetryRunRequest, RpcError } from "@drover/proto";
import type { Provider, TaskSeed } from "@drover/provider-sdk";
import { type SQL, sql } from "drizzle-orm";
import { quoted } from "./quote.js";
import { noteHolds, type Sources } from "./run-outcomes.js";
import { invalid, optionalText } from "./validation.js";

/** Which of a run's rows a re-drive reads again; every part given must hold for a row. */
export interface RedriveFilter {
  kind?: string;
  reason?: string;
  sourceIds?: string[];
}

/** Ids a re-drive may name at once: a re-drive of more is one by reason or kind. */
const MAX_IDS = 10_000;

/** The request's filter, or undefined for a plain retry (none of its fields set). */
export function redriveFilter(req: RetryRunRequest): RedriveFilter | undefined {
  if (!req.kind && !req.reason && req.sourceIds.length === 0) return undefined;
  const filter: RedriveFilter = {};
  if (req.kind) filter.kind = optionalText("kind", req.kind, 64);
  if (req.reason) {
    if (!req.reason.trim()) throw invalid("reason must not be blank");
    filter.reason = optionalText("reason", req.reason, 4096);
  }
  if (req.sourceIds.length > 0) {
    if (req.sourceIds.length > MAX_IDS)
      throw invalid(
        `source_ids holds ${req.sourceIds.length} ids; at most ${MAX_IDS} at once (re-drive by reason or kind for more)`,
      );
    for (const id of req.sourceIds) {
      if (!id.trim()) throw invalid("source_ids holds an empty id");
      optionalText("source_ids", id, 256);
    }
    filter.sourceIds = [...new Set(req.sourceIds)];
  }
  return filter;
}

function describe(filter: RedriveFilter): string {
  const parts: string[] = [];
  if (filter.kind) parts.push(`kind ${filter.kind}`);
  if (filter.reason) parts.push(`reason ${quoted(filter.reason)}`);
  if (filter.sourceIds)
    parts.push(
      `source ids ${filter.sourceIds.slice(0, 10).join(",")}${filter.sourceIds.length > 10 ? ",…" : ""}`,
    );
  return parts.join(", ");
}

function precondition(message: string): RpcError {
  return new RpcError(Code.FAILED_PRECONDITION, message);
}

/**
 * The rows a re-drive reads again, per kind: the run's rows that failed (an error note) or that it
 * holds as a skipped placeholder (a note on a slot this run skipped), whose note still holds
 * (noteHolds: not written since) and that match the filter. The same notes ListNotes groups, so a
 * reason group's "retry these" takes exactly the rows it counts. Index-backed: the run's notes,
 * one ledger probe per note.
 */
export async function redriveRows(
  q: Queryable,
  sources: Sources,
  run: RunRow,
  filter: RedriveFilter,
): Promise<Map<string, string[]>> {
  const where: SQL[] = [];
  if (filter.kind) where.push(sql`and n.kind = ${filter.kind}`);
  if (filter.reason) where.push(sql`and n.reason = ${filter.reason}`);
  if (filter.sourceIds) where.push(sql`and n.subject_id = any(${sql.param(filter.sourceIds)}::text[])`);
  const rows = await q.execute<{ kind: string; ids: string[] }>(sql`
    select n.kind, array_agg(distinct n.subject_id order by n.subject_id) as ids
      from drover.notes n
     where n.run_id = ${run.id}::uuid and n.subject_id is not null
       ${sql.join(where, sql` `)}
       and (n.level = 'error' or exists (
             select 1 from drover.ledger l
              where l.tenant_id = ${run.tenantId} and l.source = ${run.source}
                and l.source_account = ${run.sourceAccount} and l.kind = n.kind
                and l.source_id = n.subject_id and l.run_id = ${run.id}::uuid and l.action = 'skipped'))
       and ${noteHolds(sources, run, sql`n`)}
     group by n.kind`);
  return new Map(rows.map((r) => [r.kind, r.ids]));
}

/**
 * The tasks of a re-drive of `run`, checked: a run that has finished, a source that can read rows
 * again, a kind of the run, and at least one row matching. Each refusal names why.
 */
export async function planRedrive(
  q: Queryable,
  sources: Sources,
  provider: Provider,
  run: RunRow,
  filter: RedriveFilter,
  key: string,
): Promise<{ seeds: TaskSeed[]; rows: number }> {
  // A closing pass (the crm's catch-up) is in the plan but has no rows of its own.
  const kinds = run.plan.flat().filter((k) => !provider.closingKinds?.includes(k));
  if (filter.kind && !kinds.includes(filter.kind))
    throw invalid(`kind ${quoted(filter.kind)} is not a kind of run ${run.id} (${kinds.join(", ")})`);
  if (run.status !== "succeeded" && run.status !== "failed")
    throw precondition(
      `run ${run.id} is ${run.status}; only a finished run (succeeded or failed) can be re-driven`,
    );
  const redrive = provider.redrive;
  if (!redrive)
    throw precondition(`the ${provider.name} source cannot read chosen rows again; retry without a filter`);
  if (filter.kind) {
    const refused = redrive.refuses(filter.kind);
    if (refused) throw precondition(refused);
  }
  const byKind = await redriveRows(q, sources, run, filter);
  if (byKind.size === 0)
    throw precondition(
      `no row of run ${run.id} that failed or was skipped, and still is, matches ${describe(filter)} (ListNotes shows the run's current reasons)`,
    );
  const seeds: TaskSeed[] = [];
  let rows = 0;
  for (const [kind, ids] of byKind) {
    const refused = redrive.refuses(kind);
    // A filter without a kind may span kinds (ids are per kind, a reason may be shared): one that
    // cannot be read again refuses the whole re-drive, rather than re-driving part of what was asked.
    if (refused)
      throw precondition(
        `${kind}: ${refused}; ${[...byKind.keys()].join(", ")} match: name a kind to re-drive one of them`,
      );
    seeds.push(...redrive.seeds(kind, ids, key));
    rows += ids.length;
  }
  return { seeds, rows };
}
