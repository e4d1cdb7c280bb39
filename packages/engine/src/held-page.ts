import type { Queryable } from "@drover/db";
import { type HeldRow, type HeldSlot, heldRowsQuery, heldSlotOf, type LedgerScope } from "@drover/ledger";
import { sql } from "drizzle-orm";
import { type Checkpoint, checkpointMoves, LostClaimError } from "./task-transitions.js";

/**
 * The statements that move a task past rows without writing anything, each one round trip and one
 * commit that does not wait for the WAL flush (synchronous_commit off for that statement alone).
 * That is safe because such a checkpoint records no write, only a move past rows whose outcome was
 * committed durably before (ledger slots of an earlier run or window) or past nothing: a crash that
 * loses it loses only the move, and the retry finds the same rows held, or the same empty page.
 * WAL is replayed in order, so no later commit of the task survives without it. A re-run of an
 * imported tenant moves over nearly every page this way; before, a page it held whole cost the
 * question, then a window transaction (begin, its deadline settings, the checkpoint, a commit
 * waiting for the flush).
 */

/**
 * Which of `sourceIds` (one kind) the ledger holds, and, if it holds every one, the checkpoint `c`
 * past them, in the same statement. `moved` says whether the checkpoint was written; when some row
 * is not held nothing is written and the caller goes on with `held` (no second question).
 * A fence that fails while every row is held is a lost claim (LostClaimError).
 */
export async function checkpointPastHeldRows(
  q: Queryable,
  scope: LedgerScope,
  kind: string,
  sourceIds: readonly string[],
  task: { id: number; claimToken: string },
  c: Checkpoint,
): Promise<{ held: Map<string, HeldSlot>; moved: boolean }> {
  const asked = new Set(sourceIds).size;
  const [row] = await q.execute<{ held: HeldRow[]; moved: number }>(sql`
    with held as (${heldRowsQuery(scope, kind, sourceIds)}),
    ${checkpointMoves(task.id, task.claimToken, c, sql`(select count(*) from held) = ${asked}`)},
    lazy as (select set_config('synchronous_commit', 'off', true) from moved)
    select coalesce((select json_agg(held) from held), '[]'::json) as held,
           (select count(*) from moved)::int + 0 * (select count(*) from lazy)::int as moved`);
  const held = new Map<string, HeldSlot>();
  for (const r of row?.held ?? []) held.set(r.source_id, heldSlotOf(r));
  const moved = (row?.moved ?? 0) === 1;
  if (!moved && held.size === asked) throw new LostClaimError(task.id);
  return { held, moved };
}

/** The checkpoint `c` of a position that holds nothing to write (an empty page). LostClaimError when fenced out. */
export async function checkpointWithoutWrites(
  q: Queryable,
  task: { id: number; claimToken: string },
  c: Checkpoint,
): Promise<void> {
  const rows = await q.execute(sql`
    with ${checkpointMoves(task.id, task.claimToken, c)},
    lazy as (select set_config('synchronous_commit', 'off', true) from moved)
    select id from moved, lazy`);
  if (rows.length !== 1) throw new LostClaimError(task.id);
}
