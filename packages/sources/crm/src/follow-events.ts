import {
  PermanentError,
  REDRIVE_SEED_KEY_PREFIX,
  type SourceRow,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { confirmGone } from "./deletion-sweep.js";
import { IDS_PER_REQUEST, readRowsAgain } from "./rows-by-ids.js";
import { COMPARED } from "./verifier.js";

/**
 * Work from the source's change events (webhooks) of a follow run: the ids an event named, read
 * again a hundred a request (v2 `ids`, as a re-drive reads) and written through the ledger as a
 * catch-up writes (a record Drover created takes the source's values, a matched one is only
 * filled where empty: `reapply`); an id the source no longer has is confirmed deleted by id and
 * applied as the deletion sweep applies it (engine source-deletions.ts), merges included: Pipedrive
 * sends a merge as a delete of the merged record (confirmed gone here) and a change of the one
 * kept (read again here). `applied` marks the deletions committed, so a retry does not redo them.
 */
export interface EventCursor {
  redrive: string[];
  events: true;
  applied?: boolean;
}

export function isEventCursor(cursor: Record<string, unknown>): boolean {
  return cursor.events === true && Array.isArray(cursor.redrive);
}

/**
 * Seeds for changed ids of one kind, a hundred per task. `batch` names the events they came from
 * (their stream sequence range), so seeding the same batch again is a no-op. The key starts like a
 * re-drive's: a row still bad at the source is noted without failing the task.
 */
export function eventSeeds(kind: string, ids: readonly string[], batch: string): TaskSeed[] {
  const seeds: TaskSeed[] = [];
  for (let i = 0; i < ids.length; i += IDS_PER_REQUEST) {
    const cursor: EventCursor = { redrive: ids.slice(i, i + IDS_PER_REQUEST), events: true };
    seeds.push({
      kind,
      seedKey: `${REDRIVE_SEED_KEY_PREFIX}events:${batch}:${kind}:${i / IDS_PER_REQUEST}`,
      cursor: { ...cursor },
    });
  }
  return seeds;
}

export async function applyEvents(
  ctx: TaskContext,
  parse: (raw: unknown) => unknown,
  write: (rows: readonly SourceRow<unknown>[]) => Promise<unknown>,
): Promise<TaskResult> {
  const cursor = ctx.task.cursor as unknown as EventCursor;
  if (cursor.applied) return {};
  const kind = ctx.task.kind;
  const check = COMPARED[kind];
  if (!check) throw new PermanentError(`crm provider cannot follow events of kind "${kind}"`);
  if (!ctx.applySourceDeletions) throw new PermanentError("this engine cannot apply deletions at the source");
  const { baseUrl } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);
  const { raws } = await readRowsAgain(client, kind, check, cursor.redrive, {
    signal: ctx.signal,
    onRow: () => ctx.working(),
  });
  const rows: SourceRow<unknown>[] = [];
  const missing: string[] = [];
  const gone: string[] = [];
  for (const id of cursor.redrive) {
    const raw = raws.get(id);
    if (raw === undefined) {
      missing.push(id);
      continue;
    }
    // A GET by id still answers a deleted record, marked so. A deal is written as it is (the
    // catch-up's way: its writer marks a deal the source deleted); any other kind is a deletion.
    if (kind !== "deals" && markedDeleted(raw)) {
      gone.push(id);
      continue;
    }
    try {
      rows.push({ sourceId: id, data: parse(raw) });
    } catch (err) {
      rows.push({ sourceId: id, data: { rowError: (err as Error).message } });
    }
  }
  if (rows.length > 0) await write(rows);
  // Not in an `ids` list: deleted, merged away, or not visible; only a GET by id says which.
  if (missing.length > 0) gone.push(...(await confirmGone(ctx, client, kind, missing)));
  const applied: EventCursor = { ...cursor, applied: true };
  await ctx.applySourceDeletions(kind, { gone, restored: [] }, { ...applied });
  return {};
}

/** How Pipedrive marks a deleted record it still answers: `is_deleted` (v2), `active_flag: false` (v1). */
function markedDeleted(raw: unknown): boolean {
  const r = raw as { is_deleted?: unknown; active_flag?: unknown } | null;
  return r?.is_deleted === true || r?.active_flag === false;
}
