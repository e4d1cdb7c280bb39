import type { SourceRow, TaskContext, TaskResult, TaskSeed } from "@drover/provider-sdk";
import { runSettings } from "./config.js";
import { readListPage } from "./list-pages.js";
import type { ObjectType } from "./object-types.js";
import { pageRows } from "./page-rows.js";
import type { ProductRow } from "./product-rows.js";
import { clientFor } from "./run-client.js";
import { runProperties } from "./run-properties.js";
import { batchFor, refsOf } from "./writers.js";

/**
 * Where a type's list walk stands: the live list or the archived one (HubSpot's recycle bin: what
 * it deleted, written with its deletion mark), each its own chain, a page of 100 at a time. `after` is the cursor
 * the previous page gave, passed back verbatim (HubSpot documents it only as a token: a page
 * cannot be addressed, so one chain of tasks walks a list, each handing the next cursor on).
 */
export interface ListCursor {
  archived: boolean;
  after: string | null;
  /** Pages walked before this one, for the seed key (each page's key is unique in the chain). */
  page: number;
}

export function isListCursor(cursor: Record<string, unknown>): boolean {
  return typeof cursor.archived === "boolean" && "after" in cursor;
}

export const FIRST_PAGE: ListCursor = { archived: false, after: null, page: 0 };
export const FIRST_ARCHIVED_PAGE: ListCursor = { archived: true, after: null, page: 0 };

export function listPageKey(type: string, c: ListCursor): string {
  return `${type}:${c.archived ? "archived" : "live"}:page:${c.page}`;
}

/** The parents a page's rows name, by HubSpot's kind names, for one ledger query. */
export function parentsOf(
  type: ObjectType,
  rows: readonly SourceRow<ProductRow>[],
): Record<string, string[]> {
  const wanted: Record<string, string[]> = {};
  for (const row of rows) {
    if ("rowError" in (row.data as object)) continue;
    for (const [kind, id] of Object.entries(refsOf(type, row.data as ProductRow))) {
      if (!id) continue;
      wanted[kind] ??= [];
      wanted[kind].push(id);
    }
  }
  return wanted;
}

/**
 * A list task: from its cursor, up to `pagesPerTask` pages, each read once per property batch,
 * its associations read (one v4 batch per parent type), its parents resolved in one query and
 * written in windows. A page the same task goes on from commits its last window with the cursor
 * moved to the next page, so a retry or a resume starts at the first page not committed; the last
 * page the task walks hands over to a successor task. The next page of the same task is listed
 * while this one's associations are read and its rows written: the source's calls and the
 * database's work overlap instead of taking turns. A page read ahead that a failed attempt never
 * wrote is read again by the retry (its request lost, no row).
 */
export async function walkList(ctx: TaskContext, type: ObjectType): Promise<TaskResult> {
  const { settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, ctx.pacer);
  const properties = await runProperties(ctx, client, type);
  const list = (at: ListCursor) => {
    const listing = readListPage(
      client,
      type,
      { after: at.after, archived: at.archived, batches: properties.batches },
      ctx.signal,
    );
    // Awaited a turn later; a failure before then must not count as unhandled.
    listing.catch(() => {});
    return listing;
  };
  let cursor = ctx.task.cursor as unknown as ListCursor;
  let listing = list(cursor);
  for (let walked = 1; ; walked++) {
    const page = await listing;
    const next: ListCursor | undefined =
      page.after !== null
        ? { archived: cursor.archived, after: page.after, page: cursor.page + 1 }
        : undefined;
    const goOn = next && walked < settings.pagesPerTask ? next : undefined;
    // The next page is asked for as soon as this one's cursor is known: its list request goes out
    // beside this page's associations, and is answered while this page is written. A chain then
    // waits on one request a page, not on two and the database.
    if (goOn) listing = list(goOn);
    const rows = await pageRows(client, type, page.rows, properties.custom, ctx.signal);
    await ctx.writeBatches(
      rows,
      async (toWrite) => batchFor(type, ctx.run.tenantId, await ctx.resolveParents(parentsOf(type, toWrite))),
      { windowSize: settings.windowSize, ...(goOn ? { nextCursor: { ...goOn } } : {}) },
    );
    ctx.working();
    if (goOn) {
      cursor = goOn;
      continue;
    }
    const successors: TaskSeed[] = next
      ? [{ kind: type, seedKey: listPageKey(type, next), cursor: { ...next } }]
      : [];
    return { successors };
  }
}
