import type { NoteLevel, Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

export interface NoteInput {
  level: NoteLevel;
  kind: string;
  subjectId: string | null;
  reason: string;
}

/**
 * Appends a task's buffered notes in one statement. Called inside the window's transaction: a
 * row's failure note commits with the checkpoint that moves past the row, so no failed row can be
 * skipped by a resume without its note.
 *
 * Warnings and info are capped per run (a million identical "not linked" notes help nobody);
 * errors are never dropped, because an error note is how a failed row stays accounted for.
 */
export async function appendNotes(
  q: Queryable,
  runId: string,
  taskId: number | null,
  notes: readonly NoteInput[],
  cap: number,
): Promise<void> {
  if (notes.length === 0) return;
  const errors = notes.filter((n) => n.level === "error");
  const others = notes.filter((n) => n.level !== "error");
  const insert = (list: readonly NoteInput[], capped: boolean) => {
    const payload = JSON.stringify(
      list.map((n) => ({ level: n.level, kind: n.kind, subject_id: n.subjectId, reason: n.reason })),
    );
    return q.execute(sql`
      insert into drover.notes (run_id, task_id, level, kind, subject_id, reason)
      select ${runId}::uuid, ${taskId}, n.level, n.kind, n.subject_id, n.reason
        from jsonb_to_recordset(${payload}::jsonb) as n(level text, kind text, subject_id text, reason text)
       where not ${capped}
          or (select count(*) from drover.notes x where x.run_id = ${runId}::uuid and x.level <> 'error') < ${cap}`);
  };
  if (errors.length > 0) await insert(errors, false);
  if (others.length > 0) await insert(others, true);
}

/**
 * The run's notes about rows of `kind` that a later window of it wrote (a re-drive of a source
 * without a ledger, WriteOptions.settlesNotes) no longer hold. Called inside that window's
 * transaction, before its own notes are appended: the row leaves the failed count exactly when its
 * write commits. One probe of notes_subject per row.
 */
export async function settleNotes(
  q: Queryable,
  runId: string,
  kind: string,
  subjectIds: readonly string[],
): Promise<void> {
  if (subjectIds.length === 0) return;
  await q.execute(sql`
    update drover.notes set settled_at = now()
     where kind = ${kind} and subject_id = any(${sql.param([...subjectIds])}::text[])
       and run_id = ${runId}::uuid and settled_at is null`);
}

/**
 * One note, unless the run already has the same one (kind, subject and reason): what a provider
 * says of the source (TaskContext.noteOnce), which a retried or resumed task would otherwise repeat.
 */
export async function appendNoteOnce(
  q: Queryable,
  runId: string,
  taskId: number | null,
  note: NoteInput,
): Promise<void> {
  await q.execute(sql`
    insert into drover.notes (run_id, task_id, level, kind, subject_id, reason)
    select ${runId}::uuid, ${taskId}, ${note.level}, ${note.kind}, ${note.subjectId}, ${note.reason}
     where not exists (select 1 from drover.notes
                        where run_id = ${runId}::uuid and kind = ${note.kind} and reason = ${note.reason}
                          and subject_id is not distinct from ${note.subjectId})`);
}
