import {
  PermanentError,
  type SweepCursor,
  sweepSeeds,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
  TransientError,
} from "@drover/provider-sdk";
import { readByIds } from "./batch-read.js";
import type { HubSpotClient } from "./client.js";
import { listIds } from "./list-pages.js";
import type { ObjectType } from "./object-types.js";
import { clientFor } from "./run-client.js";
import type { SearchMark } from "./search-pace.js";

/**
 * Deletions no search reports. HubSpot's delete archives a record: it leaves the live list and every
 * search, goes to the archived list (the recycle bin, for 90 days, then it is purged), and its
 * modification time does not move (airbyte#19838), so a catch-up by modification time never sees
 * it. A follow pass ends with one sweep per type, spending as little of the account's allowance as
 * the counts allow:
 * - one search for the type's live total; against the ledger's held rows not marked deleted, it says
 *   whether something left (more held than live) or came back (fewer held than live);
 * - only when something left: the archived list's ids (100 a request), the held rows among them
 *   gone; if more are still held than live, the rest asked for by id (100 a request), and what
 *   HubSpot cannot find (purged from the recycle bin, or merged away) gone too;
 * - only when fewer are held than live and some held rows are marked deleted: those asked for by id,
 *   and what comes back live restored.
 * A pass with nothing deleted costs one request a type. An archive and a restore in the same pass
 * cancel out in the counts, as does a record added after the catch-up searched (that one only until
 * the next pass reads it): what they hide is found by a later pass whose counts differ. What a sweep
 * finds is applied through the ledger with the task's checkpoint (the engine's source-deletions.ts).
 *
 * The sweeps of a pass are one chain, type after type, as the catch-up's are: each starts with a
 * search, and searches are paced per process (five a second per account); side by side in two
 * workers they would be ten. Each hands its last second's searches on to the next.
 */
interface HubSpotSweepCursor extends SweepCursor {
  /** The types swept after this one. */
  chain?: ObjectType[];
  searchedAt?: SearchMark[];
}

/** The first sweep of a pass's chain over `types`, told of the searches its pass just made. */
export function sweepSeed(
  types: readonly ObjectType[],
  pass: number,
  searchedAt: SearchMark[] = [],
): TaskSeed[] {
  const [first, ...chain] = types;
  if (!first) return [];
  const [seed] = sweepSeeds([first], pass);
  const cursor: HubSpotSweepCursor = {
    ...(seed!.cursor as unknown as SweepCursor),
    chain,
    ...(searchedAt.length > 0 ? { searchedAt } : {}),
  };
  return [{ ...seed!, cursor: { ...cursor } }];
}

export async function sweepDeletions(ctx: TaskContext, type: ObjectType): Promise<TaskResult> {
  const cursor = ctx.task.cursor as unknown as HubSpotSweepCursor;
  const client = clientFor(ctx.run, ctx.pacer);
  client.rememberSearches(cursor.searchedAt ?? []);
  if (!cursor.applied) await sweep(ctx, client, type, cursor);
  return { successors: sweepSeed(cursor.chain ?? [], cursor.pass, client.recentSearches()) };
}

async function sweep(ctx: TaskContext, client: HubSpotClient, type: ObjectType, cursor: HubSpotSweepCursor) {
  if (!ctx.heldSourceRows || !ctx.applySourceDeletions)
    throw new PermanentError("this engine cannot apply deletions at the source");
  const live = await liveTotal(client, type, ctx.signal);
  // Counted after the search: a record the catch-up added since is held, and at worst hides a
  // deletion from this pass's counts, never makes one up. The rows are read only when the counts
  // differ: a quiet pass reads none.
  const counts = await ctx.heldSourceCounts?.(type);
  if (counts && counts.held - counts.deleted === live) return;
  const held = await ctx.heldSourceRows(type);
  const heldLive = held.filter((h) => !h.deleted).map((h) => h.sourceId);
  const heldDeleted = held.filter((h) => h.deleted).map((h) => h.sourceId);

  const gone: string[] = [];
  if (heldLive.length > live) {
    const archived = new Set(
      await listIds(client, type, true, { signal: ctx.signal, onPage: () => ctx.working() }),
    );
    const unarchived: string[] = [];
    for (const id of heldLive) (archived.has(id) ? gone : unarchived).push(id);
    if (unarchived.length > live) gone.push(...(await notFound(ctx, client, type, unarchived)));
  }
  let restored: string[] = [];
  if (live > heldLive.length - gone.length && heldDeleted.length > 0) {
    const read = await readByIds(client, type, heldDeleted, {
      properties: ["hs_object_id"],
      signal: ctx.signal,
    });
    restored = read.rows.flatMap((r) => ("record" in r && !r.record.archived ? [r.record.id] : []));
  }
  const { searchedAt: _, ...at } = cursor;
  const applied: HubSpotSweepCursor = { ...at, applied: true };
  await ctx.applySourceDeletions(type, { gone, restored }, { ...applied });
}

/** The type's live records, as a search counts them (`total`; search never counts archived ones). */
async function liveTotal(client: HubSpotClient, type: ObjectType, signal: AbortSignal): Promise<number> {
  const answer = await client.search<{ total?: unknown }>(
    `/crm/v3/objects/${type}/search`,
    { filterGroups: [], properties: ["hs_object_id"], limit: 1 },
    signal,
  );
  if (typeof answer?.total !== "number")
    throw new TransientError(`/crm/v3/objects/${type}/search: the answer has no total`);
  return answer.total;
}

/** The ids HubSpot says it has no live record of (OBJECT_NOT_FOUND): purged, or merged into another. */
async function notFound(
  ctx: TaskContext,
  client: HubSpotClient,
  type: ObjectType,
  ids: readonly string[],
): Promise<string[]> {
  const read = await readByIds(client, type, ids, { properties: ["hs_object_id"], signal: ctx.signal });
  ctx.working();
  return read.misses.filter((m) => m.category === "OBJECT_NOT_FOUND").map((m) => m.id);
}
