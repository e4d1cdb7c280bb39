import { type Db, pgErrorCode, type Queryable, type RunRow, type Tx } from "@drover/db";
import type { ProductRecords, RecordLink, TaskSeed } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { appendNotes, type NoteInput } from "./notes.js";
import { writeCheckpoint } from "./task-transitions.js";
import { destinationWindow, WINDOW_DEADLINE_MS } from "./window-transaction.js";

/**
 * Reverting a run: removing from the product every record the run created (its ledger rows with
 * action `created`) and releasing those ledger rows, while what it matched stays as it was.
 *
 * A revert is a run of its own (runs.reverts_run_id), so it is checkpointed, stoppable and
 * resumable like any run: its plan is the reverted run's plan backwards (children before parents),
 * one task per kind walks the reverted run's created ledger rows of that kind by keyset (ledger id),
 * and each window removes its records, releases their ledger rows, writes its notes and moves the
 * task's cursor in one transaction fenced by the claim. A worker killed mid-window loses the whole
 * window, which the next attempt removes again from the same cursor: nothing is left and nothing
 * is removed twice.
 *
 * Another run's records may refer to records this run created (a person a later run created, in
 * an organization this one created), or hold one of them as matched. The revert refuses those
 * records (one note each, the record stays) unless it was started with force: then the links are
 * cleared (a record that cannot exist without its parent, an email, is removed with it and its
 * ledger row released), the other run's matched slot on the record released, and each noted.
 */

/*
 * A record left in place is noted as an error, which the per-run cap on notes never drops: each
 * one is a record the revert did not remove. What force cleared is a warning (capped).
 */

/** Ledger rows removed per window: each is a delete of a few product rows and of their ledger rows. */
export const REVERT_WINDOW_SIZE = 200;

/** Where a revert task stands: every created ledger row of its kind up to this id is done. */
export interface RevertCursor {
  afterLedgerId: number;
}

/** The revert run's plan: the reverted run's phases backwards, so children go before their parents. */
export function revertPlan(target: Pick<RunRow, "plan">): string[][] {
  return [...target.plan].reverse().map((group) => [...group]);
}

/** One task per kind of the phase, walking the whole kind by keyset from the start. */
export function revertSeeds(kinds: readonly string[]): TaskSeed[] {
  return kinds.map((kind) => ({
    kind,
    seedKey: `revert:${kind}`,
    cursor: { afterLedgerId: 0 } satisfies RevertCursor as unknown as Record<string, unknown>,
  }));
}

/** Another run's record that refers to, or holds as matched, a record the reverted run created. */
export interface RevertDependent {
  /** The other run, and its ledger row's kind and source id. */
  runId: string;
  kind: string;
  sourceId: string;
  recordType: string;
  recordId: number;
  /** The reverted run's record it depends on. */
  parentType: string;
  parentId: number;
  /** `table.column` of the link, or `matched` when the other run matched the record itself. */
  via: string;
  required: boolean;
}

/**
 * Other runs' records depending on records `runId` created, at most `limit` (RevertRun names them
 * and refuses without force). With `parentIds`, only those of the given records of one type (a
 * revert window). One query per link.
 */
export async function findRevertDependents(
  q: Queryable,
  records: ProductRecords,
  target: { id: string; tenantId: string },
  options: { limit: number; parentType?: string; parentIds?: readonly number[] },
): Promise<RevertDependent[]> {
  const found: RevertDependent[] = [];
  const scope = (alias: string) =>
    options.parentIds
      ? sql`and ${sql.raw(alias)}.record_id = any(${sql.param([...options.parentIds])}::bigint[])`
      : sql``;
  for (const link of records.links) {
    if (found.length >= options.limit) break;
    if (options.parentType && link.parent !== options.parentType) continue;
    const table = records.tables[link.recordType];
    if (!table) continue;
    const rows = await q.execute<{
      run_id: string;
      kind: string;
      source_id: string;
      record_id: string;
      parent_id: string;
    }>(sql`
      select o.run_id::text, o.kind, o.source_id, o.record_id::text, p.record_id::text as parent_id
        from drover.ledger p
        join ${sql.raw(table)} c on c.tenant_id = p.tenant_id and c.${sql.identifier(link.column)} = p.record_id
        join drover.ledger o on o.tenant_id = p.tenant_id and o.record_type = ${link.recordType}
                            and o.record_id = c.id and o.action in ('created', 'matched')
       where p.run_id = ${target.id}::uuid and p.action = 'created' and p.record_type = ${link.parent}
         and o.run_id <> ${target.id}::uuid ${scope("p")}
       limit ${options.limit - found.length}`);
    for (const r of rows)
      found.push({
        runId: r.run_id,
        kind: r.kind,
        sourceId: r.source_id,
        recordType: link.recordType,
        recordId: Number(r.record_id),
        parentType: link.parent,
        parentId: Number(r.parent_id),
        via: `${table}.${link.column}`,
        required: link.required ?? false,
      });
  }
  if (found.length < options.limit) {
    const rows = await q.execute<{
      run_id: string;
      kind: string;
      source_id: string;
      record_type: string;
      record_id: string;
    }>(sql`
      select o.run_id::text, o.kind, o.source_id, o.record_type, o.record_id::text
        from drover.ledger p
        join drover.ledger o on o.tenant_id = p.tenant_id and o.record_type = p.record_type
                            and o.record_id = p.record_id and o.action = 'matched'
       where p.run_id = ${target.id}::uuid and p.action = 'created' and o.run_id <> ${target.id}::uuid
         ${options.parentType ? sql`and p.record_type = ${options.parentType}` : sql``} ${scope("p")}
       limit ${options.limit - found.length}`);
    for (const r of rows)
      found.push({
        runId: r.run_id,
        kind: r.kind,
        sourceId: r.source_id,
        recordType: r.record_type,
        recordId: Number(r.record_id),
        parentType: r.record_type,
        parentId: Number(r.record_id),
        via: "matched",
        required: false,
      });
  }
  return found;
}

/** A dependent in words, for RevertRun's refusal and the revert's notes. */
export function describeDependent(d: RevertDependent): string {
  return d.via === "matched"
    ? `run ${d.runId} matched it (${d.kind} ${d.sourceId})`
    : `run ${d.runId}'s ${d.kind} ${d.sourceId} (${d.recordType} ${d.recordId}) links to it through ${d.via}`;
}

export interface RevertTaskDeps {
  db: Db;
  /** The revert run and the run it reverts. */
  run: Pick<RunRow, "id" | "tenantId" | "revertForce">;
  revertsRunId: string;
  records: ProductRecords;
  task: { id: number; kind: string; cursor: Record<string, unknown> };
  claimToken: string;
  notesCap: number;
  windowSize?: number | undefined;
  windowDeadlineMs?: number | undefined;
  /** How long the run parks when the destination holds a window past its limit (DESTINATION_PROBE_MS). */
  destinationProbeMs?: number | undefined;
  /** Between windows: true when the run is stopping (the task ends cancelled); throws when the attempt must end. */
  stopRequested(): Promise<boolean>;
}

export interface RevertTaskSummary {
  removed: number;
  /** Created records already gone from the product: their ledger rows were released all the same. */
  gone: number;
  /** Records left in place, each with a note saying why. */
  kept: number;
}

type CreatedRow = {
  id: string;
  source_id: string;
  record_type: string | null;
  record_id: string | null;
};

/**
 * Runs one revert task from its cursor to the end of its kind. Returns "stopped" when the run is
 * stopping (the caller ends the task cancelled; a resume continues from the cursor).
 */
export async function runRevertTask(
  deps: RevertTaskDeps,
): Promise<{ stopped: boolean; summary: RevertTaskSummary }> {
  const summary: RevertTaskSummary = { removed: 0, gone: 0, kept: 0 };
  let after = Number((deps.task.cursor as Partial<RevertCursor>).afterLedgerId ?? 0);
  const size = deps.windowSize ?? REVERT_WINDOW_SIZE;
  for (;;) {
    if (await deps.stopRequested()) return { stopped: true, summary };
    const done = await destinationWindow(
      deps.db,
      { deadlineMs: deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, probeMs: deps.destinationProbeMs },
      async (tx) => {
        // Ordered by the ledger's id itself, not by its text: the keyset's order. Locked, so that an
        // attempt whose claim was taken over and its successor never work on one row at once: the
        // second waits until the first's window rolls back (its checkpoint is refused) or commits.
        const rows = await tx.execute<CreatedRow>(sql`
        select l.id::text as id, l.source_id, l.record_type, l.record_id::text as record_id
          from drover.ledger l
         where l.run_id = ${deps.revertsRunId}::uuid and l.kind = ${deps.task.kind} and l.action = 'created'
           and l.id > ${after}
         order by l.id limit ${size} for update`);
        if (rows.length === 0) return true;
        const window = await revertWindow(tx, deps, rows);
        const last = Number(rows[rows.length - 1]!.id);
        await appendNotes(tx, deps.run.id, deps.task.id, window.notes, deps.notesCap);
        await writeCheckpoint(tx, deps.task.id, deps.claimToken, {
          processedOffset: 0,
          cursor: { afterLedgerId: last } satisfies RevertCursor,
          statsDelta: { removed: window.removed, gone: window.gone, kept: window.kept },
        });
        summary.removed += window.removed;
        summary.gone += window.gone;
        summary.kept += window.kept;
        after = last;
        return rows.length < size;
      },
    );
    deps.task.cursor = { afterLedgerId: after };
    if (done) return { stopped: false, summary };
  }
}

/** Removes one window's records, type by type, and releases the ledger rows of those removed or gone. */
async function revertWindow(
  tx: Tx,
  deps: RevertTaskDeps,
  rows: readonly CreatedRow[],
): Promise<RevertTaskSummary & { notes: NoteInput[] }> {
  const notes: NoteInput[] = [];
  const kind = deps.task.kind;
  const release: string[] = [];
  let removed = 0;
  let gone = 0;
  let kept = 0;
  const byType = new Map<string, CreatedRow[]>();
  for (const row of rows) {
    const table = row.record_type ? deps.records.tables[row.record_type] : undefined;
    if (!table || row.record_id === null) {
      kept++;
      notes.push({
        level: "error",
        kind,
        subjectId: row.source_id,
        reason: `not reverted: the ledger names no product record this source can remove (${row.record_type ?? "no record type"})`,
      });
      continue;
    }
    const list = byType.get(row.record_type!) ?? [];
    list.push(row);
    byType.set(row.record_type!, list);
  }

  for (const [recordType, list] of byType) {
    const table = deps.records.tables[recordType]!;
    const ids = list.map((r) => Number(r.record_id));
    const dependents = await findRevertDependents(
      tx,
      deps.records,
      { id: deps.revertsRunId, tenantId: deps.run.tenantId },
      { limit: 10_000, parentType: recordType, parentIds: ids },
    );
    const refused = new Set<number>();
    for (const d of dependents) {
      if (!deps.run.revertForce) {
        if (!refused.has(d.parentId)) {
          refused.add(d.parentId);
          const row = list.find((r) => Number(r.record_id) === d.parentId)!;
          notes.push({
            level: "error",
            kind,
            subjectId: row.source_id,
            reason:
              d.via === "matched"
                ? `not reverted: run ${d.runId} matched it; revert with force to release that slot`
                : `not reverted: run ${d.runId}'s ${d.kind} link to it through ${d.via}; revert with force to clear such links`,
          });
        }
        continue;
      }
      notes.push(await clearDependent(tx, deps, d));
    }
    const removable = list.filter((r) => !refused.has(Number(r.record_id)));
    kept += list.length - removable.length;
    if (removable.length === 0) continue;
    const result = await removeRecords(tx, deps.run.tenantId, table, removable);
    removed += result.removed.length;
    release.push(...result.removed.map((r) => r.id));
    await releasePointers(tx, deps.run.tenantId, recordType, [...result.removed, ...result.gone]);
    for (const r of result.gone) {
      gone++;
      release.push(r.id);
      notes.push({
        level: "info",
        kind,
        subjectId: r.source_id,
        reason: `already gone from the product; its ledger row released`,
      });
    }
    for (const { row, error } of result.failed) {
      kept++;
      notes.push({ level: "error", kind, subjectId: row.source_id, reason: `not reverted: ${error}` });
    }
  }
  if (release.length > 0)
    await tx.execute(sql`delete from drover.ledger where id = any(${sql.param(release)}::bigint[])`);
  return { removed, gone, kept, notes };
}

/**
 * Every other ledger row that points at a record now gone goes with it, whatever its action: a
 * second source row the run matched to a record it created for the first (two persons sharing an
 * email) would otherwise stay "already here", and a later import would link its children to a
 * record that no longer exists. Another run's matched row on such a record only exists here when
 * the revert was forced (otherwise the record was refused above), and is released the same way.
 */
async function releasePointers(
  tx: Tx,
  tenantId: string,
  recordType: string,
  rows: readonly CreatedRow[],
): Promise<void> {
  if (rows.length === 0) return;
  await tx.execute(sql`
    delete from drover.ledger
     where tenant_id = ${tenantId} and record_type = ${recordType}
       and record_id = any(${sql.param(rows.map((r) => r.record_id!))}::bigint[])`);
}

/**
 * With force: another run's dependent loses its link (or, when it cannot exist without it, goes
 * with it and its ledger row is released); another run's matched slot on the record is released.
 * Returns the note saying which, on the dependent's own kind and source id, so the notes group by
 * what was done and by which run.
 */
async function clearDependent(tx: Tx, deps: RevertTaskDeps, d: RevertDependent): Promise<NoteInput> {
  const note = (reason: string): NoteInput => ({
    level: "warn",
    kind: d.kind,
    subjectId: d.sourceId,
    reason,
  });
  const theirs = `run ${d.runId}'s`;
  if (d.via === "matched") {
    await tx.execute(sql`
      delete from drover.ledger where run_id = ${d.runId}::uuid and kind = ${d.kind} and source_id = ${d.sourceId}
         and tenant_id = ${deps.run.tenantId} and action = 'matched'`);
    return note(
      `forced: released ${theirs} matched slot on a ${d.recordType} run ${deps.revertsRunId} created`,
    );
  }
  const link = linkOf(deps.records, d);
  const table = deps.records.tables[d.recordType]!;
  if (link.required) {
    await tx.execute(
      sql`delete from ${sql.raw(table)} where id = ${d.recordId} and tenant_id = ${deps.run.tenantId}`,
    );
    await tx.execute(sql`
      delete from drover.ledger where run_id = ${d.runId}::uuid and kind = ${d.kind} and source_id = ${d.sourceId}
         and tenant_id = ${deps.run.tenantId}`);
    return note(
      `forced: removed ${theirs} ${d.recordType} with the ${d.parentType} run ${deps.revertsRunId} created (${d.via} cannot be empty); its ledger row released`,
    );
  }
  await tx.execute(sql`
    update ${sql.raw(table)} set ${sql.identifier(link.column)} = null, updated_at = now()
     where id = ${d.recordId} and tenant_id = ${deps.run.tenantId} and ${sql.identifier(link.column)} = ${d.parentId}`);
  return note(
    `forced: cleared ${d.via} of ${theirs} ${d.recordType}, which named a ${d.parentType} run ${deps.revertsRunId} created`,
  );
}

function linkOf(records: ProductRecords, d: RevertDependent): RecordLink {
  const link = records.links.find(
    (l) => l.recordType === d.recordType && `${records.tables[l.recordType]}.${l.column}` === d.via,
  );
  if (!link) throw new Error(`no link ${d.via} of ${d.recordType}`);
  return link;
}

/**
 * Deletes the records in one statement behind a savepoint; when that fails (a product constraint
 * refusing one of them), record by record, each behind its own, so one record that cannot go
 * keeps only itself.
 */
async function removeRecords(
  tx: Tx,
  tenantId: string,
  table: string,
  rows: readonly CreatedRow[],
): Promise<{ removed: CreatedRow[]; gone: CreatedRow[]; failed: { row: CreatedRow; error: string }[] }> {
  const remove = async (q: Queryable, list: readonly CreatedRow[]) => {
    const deleted = await q.execute<{ id: string }>(sql`
      delete from ${sql.raw(table)}
       where tenant_id = ${tenantId} and id = any(${sql.param(list.map((r) => r.record_id!))}::bigint[])
      returning id::text`);
    const ids = new Set(deleted.map((d) => d.id));
    return {
      removed: list.filter((r) => ids.has(r.record_id!)),
      gone: list.filter((r) => !ids.has(r.record_id!)),
    };
  };
  // Only a product constraint refusing a record (class 23) is that record's; anything else ends the window.
  const refusal = (err: unknown) => pgErrorCode(err)?.startsWith("23") === true;
  try {
    return { ...(await tx.transaction((sp) => remove(sp, rows))), failed: [] };
  } catch (err) {
    if (!refusal(err)) throw err;
    const out = {
      removed: [] as CreatedRow[],
      gone: [] as CreatedRow[],
      failed: [] as { row: CreatedRow; error: string }[],
    };
    for (const row of rows) {
      try {
        const one = await tx.transaction((sp) => remove(sp, [row]));
        out.removed.push(...one.removed);
        out.gone.push(...one.gone);
      } catch (err) {
        if (!refusal(err)) throw err;
        out.failed.push({ row, error: err instanceof Error ? err.message : String(err) });
      }
    }
    return out;
  }
}
