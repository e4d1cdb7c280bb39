import {
  type RunInfo,
  type SeedContext,
  sleep,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import { runSettings } from "./config.js";
import { sweepSeed } from "./deletion-sweep.js";
import { parentsOf } from "./list-walk.js";
import { type ChangeWindow, changedRecords } from "./modified-search.js";
import { OBJECT_TYPES, type ObjectType } from "./object-types.js";
import { pageRows } from "./page-rows.js";
import { clientFor } from "./run-client.js";
import { runProperties } from "./run-properties.js";
import type { SearchMark } from "./search-pace.js";
import { batchFor } from "./writers.js";

/** The closing kind: what changed at the source while the run read it. */
export const CATCH_UP = "catch-up";

/**
 * HubSpot's search index lags its writes ("it may take a few moments for newly created or updated
 * CRM objects to appear in search results", search guide): a catch-up searches a window only once
 * its end is this far in the past, so a record changed just before the window closed is found.
 */
export const INDEXING_MARGIN_MS = 5_000;

/**
 * A catch-up task: the records of its type modified in `[since, until)` (epoch ms), then the chain's
 * next type. `from` is where its walk stands (the window it is in and the last id it read).
 */
export interface CatchUpCursor {
  since: number;
  /**
   * The window's end. A follow pass's seed has none: the pass is seeded when the previous one
   * closes but due an interval later, and the next pass starts where this one starts, so its first
   * task sets it when it runs (and hands it down the chain); the import's catch-up, due at once,
   * is seeded with it.
   */
  until?: number;
  chain: string[];
  from?: { window: ChangeWindow; lastId: string };
  pass?: number;
  /**
   * The import's closing pass is walked twice over its types: first up to the indexing margin
   * before it was seeded (`until`), at once, since search already holds that; then, `settle`, the
   * last margin's worth (`until` to this), by when it has passed. The account's window is not left
   * idle for the margin while the first round has work.
   */
  settleUntil?: number;
  /** This is the second round (the task keys of the two rounds differ). */
  settle?: true;
  /**
   * When the searches of the task before it in the chain were answered, within its last second:
   * the successor may run in another worker, whose search pace would not know them.
   */
  searchedAt?: (SearchMark | number)[];
}

export function isCatchUpCursor(cursor: Record<string, unknown>): boolean {
  return typeof cursor.since === "number" && Array.isArray(cursor.chain);
}

/** Past every id HubSpot gives (ids are at most 20 digits): a window walked to its end. */
const WINDOW_DONE = "99999999999999999999";

/** The run's types, parents first (companies before the contacts that point at them, …). */
function runTypes(run: RunInfo): ObjectType[] {
  const inRun = new Set(run.plan.flat());
  return OBJECT_TYPES.filter((t) => inRun.has(t));
}

function catchUpKey(type: string, c: Pick<CatchUpCursor, "pass" | "settle">): string {
  return `${c.pass ? `follow${c.pass}:` : ""}${CATCH_UP}:${c.settle ? "settle:" : ""}${type}`;
}

/**
 * The catch-up pass: one chain of tasks, type after type in parent order, so a contact added
 * mid-run exists before the deal added with it is linked. It asks for what changed from one second
 * before the run started (the lists' reads began then; a second's slack for clocks) until the pass
 * is seeded: every phase before it has read what it lists by then; in two rounds (settleUntil). A
 * follow pass asks from one second before the previous pass started until it runs itself, in one
 * round: passes come an interval apart, and the margin is waited out once a pass.
 */
export function catchUpSeed(run: RunInfo, pass?: SeedContext["pass"]): TaskSeed | undefined {
  const [first, ...chain] = runTypes(run);
  if (!first) return undefined;
  const start = pass ? Date.parse(pass.since) : (run.startedAt?.getTime() ?? 0);
  const since = start - 1_000;
  const now = Date.now();
  const cursor: CatchUpCursor = {
    since,
    ...(pass ? {} : { until: Math.max(since, now - INDEXING_MARGIN_MS), settleUntil: now }),
    chain,
    ...(pass ? { pass: pass.index } : {}),
  };
  return { kind: first, seedKey: catchUpKey(first, cursor), cursor: { ...cursor } };
}

function successor(kind: string, cursor: CatchUpCursor): TaskResult {
  return { successors: [{ kind, seedKey: catchUpKey(kind, cursor), cursor: { ...cursor } }] };
}

/**
 * One type's changes: searched by modification date in windows that never reach the search cap
 * (modified-search.ts), each page's associations read and its rows applied again where the ledger
 * holds them (as ownership allows), created where it does not. Each page commits with the walk's
 * position, so a retry resumes after the last page written.
 */
export async function catchUp(ctx: TaskContext, type: ObjectType): Promise<TaskResult> {
  const seeded = ctx.task.cursor as unknown as CatchUpCursor;
  const cursor = { ...seeded, until: seeded.until ?? Date.now() };
  const wait = cursor.until + INDEXING_MARGIN_MS - Date.now();
  if (wait > 0) await sleep(wait, ctx.signal);
  const { settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, ctx.pacer);
  client.rememberSearches(cursor.searchedAt ?? []);
  const properties = await runProperties(ctx, client, type);
  const pages = changedRecords(
    client,
    type,
    { since: cursor.since, until: cursor.until },
    { properties: properties.names, signal: ctx.signal, ...(cursor.from ? { from: cursor.from } : {}) },
  );
  for await (const page of pages) {
    const rows = await pageRows(client, type, page.rows, properties.custom, ctx.signal);
    const at: CatchUpCursor = {
      ...cursor,
      from: { window: page.window, lastId: page.lastId ?? WINDOW_DONE },
    };
    await ctx.writeBatches(
      rows,
      async (toWrite) => batchFor(type, ctx.run.tenantId, await ctx.resolveParents(parentsOf(type, toWrite))),
      { windowSize: settings.windowSize, reapply: () => true, nextCursor: { ...at } },
    );
    ctx.working();
  }
  const { from: _, searchedAt: __, ...rest } = cursor;
  const searchedAt = client.recentSearches();
  const handed = searchedAt.length > 0 ? { searchedAt } : {};
  const [next, ...chain] = cursor.chain;
  if (next) return successor(next, { ...rest, chain, ...handed });
  // A follow pass ends in the sweeps for what its searches cannot see: the records archived since.
  if (rest.pass) return { successors: sweepSeed(runTypes(ctx.run), rest.pass, searchedAt) };
  if (rest.settleUntil === undefined) return {};
  // The first round is over: the second walks every type again over the last margin's worth.
  const { settleUntil, ...firstRound } = rest;
  const [first, ...others] = runTypes(ctx.run);
  const second: CatchUpCursor = { ...firstRound, since: cursor.until, until: settleUntil, settle: true };
  return successor(first!, { ...second, chain: others, ...handed });
}
