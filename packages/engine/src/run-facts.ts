import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

/** A fact a task learned about the source for this run, or undefined while no task has. */
export async function readRunFact(q: Queryable, runId: string, key: string): Promise<unknown> {
  const [row] = await q.execute<{ value: unknown }>(sql`
    select value from drover.run_facts where run_id = ${runId}::uuid and key = ${key}`);
  return row?.value;
}

/**
 * Records a fact unless another task settled it first, and returns the one that stands: two tasks
 * learning it at once both get the first writer's value, so every task of the run acts alike.
 * The insert's own row is invisible to the select in the same statement, hence the union; and when
 * the insert waited on a concurrent writer's row, the statement's snapshot predates that writer's
 * commit, so the row is read again in a statement of its own.
 */
export async function settleRunFact(
  q: Queryable,
  runId: string,
  key: string,
  value: unknown,
): Promise<unknown> {
  const [row] = await q.execute<{ value: unknown }>(sql`
    with settled as (
      insert into drover.run_facts (run_id, key, value) values (${runId}::uuid, ${key}, ${JSON.stringify(value)}::jsonb)
      on conflict (run_id, key) do nothing
      returning value)
    select value from settled
    union all
    select value from drover.run_facts where run_id = ${runId}::uuid and key = ${key}
    limit 1`);
  if (row) return row.value;
  const settled = await readRunFact(q, runId, key);
  return settled === undefined ? value : settled;
}

/**
 * The cursors of the run's tasks of `kind` that carry `key`, oldest task first: what earlier tasks
 * kept for later ones (TaskContext.keptCursors), e.g. the message count a deal's mail was listed
 * against, which a later pass compares its count with.
 */
export async function keptCursors(
  q: Queryable,
  runId: string,
  kind: string,
  key: string,
): Promise<Record<string, unknown>[]> {
  const rows = await q.execute<{ cursor: Record<string, unknown> }>(sql`
    select cursor from drover.tasks where run_id = ${runId}::uuid and kind = ${kind} and cursor ? ${key}
     order by id`);
  return rows.map((r) => r.cursor);
}
