import type { Queryable, RunRow } from "@drover/db";
import type { RetryRunRequest } from "@drover/proto";
import { PermanentError, type Provider, type RedriveRow, type TaskSeed } from "@drover/provider-sdk";
import { type SQL, sql } from "drizzle-orm";
import { Precondition } from "./domain-errors.js";
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

/** A re-drive the run or its source cannot take as asked; `reason` as the edge sends it (rpc-status.ts). */
function precondition(message: string, reason = "REDRIVE_REFUSED"): Precondition {
  return new Precondition(message, reason);
}

/** A row a re-drive reads again, and the task whose note about it still holds (the latest). */
export interface RedriveCandidate {
  sourceId: string;
  taskId: number | null;
}

/**
 * The rows a re-drive reads again, per kind: the run's rows that failed (an error note) or that it
 * holds as a skipped placeholder (a note on a slot this run skipped), whose note still holds
 * (noteHolds: not written since) and that match the filter, each with the task of its latest such
 * note (where a source that reads by listing finds the row again). The same notes ListNotes
 * groups, so a reason group's "retry these" takes exactly the rows it counts. Index-backed: the
 * run's notes, one ledger probe per note.
 */
export async function redriveRows(
  q: Queryable,
  sources: Sources,
  run: RunRow,
  filter: RedriveFilter,
): Promise<Map<string, RedriveCandidate[]>> {
  const where: SQL[] = [];
  if (filter.kind) where.push(sql`and n.kind = ${filter.kind}`);
  if (filter.reason) where.push(sql`and n.reason = ${filter.reason}`);
  if (filter.sourceIds) where.push(sql`and n.subject_id = any(${sql.param(filter.sourceIds)}::text[])`);
  const rows = await q.execute<{ kind: string; subject_id: string; task_id: string | null }>(sql`
    select n.kind, n.subject_id, (array_agg(n.task_id order by n.id desc))[1]::text as task_id
      from drover.notes n
     where n.run_id = ${run.id}::uuid and n.subject_id is not null
       ${sql.join(where, sql` `)}
       and (n.level = 'error' or exists (
             select 1 from drover.ledger l
              where l.tenant_id = ${run.tenantId} and l.source = ${run.source}
                and l.source_account = ${run.sourceAccount} and l.kind = n.kind
                and l.source_id = n.subject_id and l.run_id = ${run.id}::uuid and l.action = 'skipped'))
       and ${noteHolds(sources, run, sql`n`)}
     group by n.kind, n.subject_id
     order by n.kind, n.subject_id`);
  const byKind = new Map<string, RedriveCandidate[]>();
  for (const r of rows) {
    const list = byKind.get(r.kind) ?? [];
    list.push({ sourceId: r.subject_id, taskId: r.task_id === null ? null : Number(r.task_id) });
    byKind.set(r.kind, list);
  }
  return byKind;
}

/** The cursors of the run's tasks that noted rows a by-listing re-drive walks again; one query. */
async function listingCursors(
  q: Queryable,
  runId: string,
  taskIds: readonly number[],
): Promise<Map<number, Record<string, unknown>>> {
  if (taskIds.length === 0) return new Map();
  const rows = await q.execute<{ id: string; cursor: Record<string, unknown> }>(sql`
    select id::text as id, cursor from drover.tasks
     where run_id = ${runId}::uuid and id = any(${sql.param(taskIds.map(String))}::bigint[])`);
  return new Map(rows.map((r) => [Number(r.id), r.cursor]));
}

/**
 * The tasks of a re-drive of `run`, checked: a run that has finished, a source that can read rows
 * again, a kind of the run, and at least one row matching. Each refusal names why. A kind the
 * source reads by id gets the rows' ids; a kind it reads by listing (RowRedrive.reads) gets each
 * row with the cursor of the task that listed it, so the source walks that listing again.
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
      "RUN_NOT_FINISHED",
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
      "NOTHING_TO_REDRIVE",
    );
  for (const kind of byKind.keys()) {
    const refused = redrive.refuses(kind);
    // A filter without a kind may span kinds (ids are per kind, a reason may be shared): one that
    // cannot be read again refuses the whole re-drive, rather than re-driving part of what was asked.
    if (refused)
      throw precondition(
        `${kind}: ${refused}; ${[...byKind.keys()].join(", ")} match: name a kind to re-drive one of them`,
      );
  }
  const listing = [...byKind].filter(([kind]) => redrive.reads(kind) === "by-listing");
  const cursors = await listingCursors(q, run.id, [
    ...new Set(listing.flatMap(([, rows]) => rows.flatMap((r) => (r.taskId === null ? [] : [r.taskId])))),
  ]);
  const seeds: TaskSeed[] = [];
  let rows = 0;
  for (const [kind, candidates] of byKind) {
    let planned: RedriveRow[];
    if (redrive.reads(kind) === "by-id") planned = candidates.map((c) => ({ sourceId: c.sourceId }));
    else {
      const unlisted = candidates.filter((c) => c.taskId === null || !cursors.has(c.taskId));
      if (unlisted.length > 0)
        throw precondition(
          `${kind} rows are read again by walking the listing that held them, and no task of run ${run.id} records where ${unlisted
            .slice(0, 10)
            .map((c) => c.sourceId)
            .join(",")}${unlisted.length > 10 ? ",…" : ""} was listed`,
        );
      planned = candidates.map((c) => ({ sourceId: c.sourceId, listedIn: cursors.get(c.taskId!)! }));
    }
    try {
      seeds.push(...redrive.seeds(kind, planned, key));
    } catch (err) {
      if (err instanceof PermanentError) throw precondition(`${kind}: ${err.message}`);
      throw err;
    }
    rows += candidates.length;
  }
  return { seeds, rows };
}
