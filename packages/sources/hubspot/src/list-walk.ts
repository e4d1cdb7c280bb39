import {
  isRowErrorInfo,
  type SourceRow,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import type { HubSpotClient } from "./client.js";
import { runSettings } from "./config.js";
import { type ListPage, readListPage } from "./list-pages.js";
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
    if (isRowErrorInfo(row.data)) continue;
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
 * page the task walks hands over to a successor task. The task's pages are read ahead of its
 * writes (readAhead): the source's calls and the database's work overlap instead of taking turns.
 * A page read ahead that a failed attempt never wrote is read again by the retry (its requests
 * lost, no row).
 */
export async function walkList(ctx: TaskContext, type: ObjectType): Promise<TaskResult> {
  const { settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, ctx.pacer);
  const properties = await runProperties(ctx, client, type);
  const pages = readAhead(ctx, client, type, properties, settings.pagesPerTask);
  try {
    return await writePages(ctx, type, pages, settings);
  } finally {
    // What is read ahead and not written goes no further: its requests stop with the task.
    pages.abandon();
  }
}

async function writePages(
  ctx: TaskContext,
  type: ObjectType,
  pages: ReturnType<typeof readAhead>,
  settings: { pagesPerTask: number; windowSize: number },
): Promise<TaskResult> {
  let cursor = ctx.task.cursor as unknown as ListCursor;
  for (let walked = 1; ; walked++) {
    const page = await pages.page(walked - 1);
    const next: ListCursor | undefined =
      page.after !== null
        ? { archived: cursor.archived, after: page.after, page: cursor.page + 1 }
        : undefined;
    const goOn = next && walked < settings.pagesPerTask ? next : undefined;
    await ctx.writeBatches(
      page.rows,
      async (toWrite) => batchFor(type, ctx.run.tenantId, await ctx.resolveParents(parentsOf(type, toWrite))),
      { windowSize: settings.windowSize, ...(goOn ? { nextCursor: { ...goOn } } : {}) },
    );
    ctx.working();
    pages.written(walked - 1);
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

interface ReadPage {
  after: string | null;
  rows: SourceRow<ProductRow>[];
}

/** Pages a task lists beyond the one it is writing: enough to keep a chain's requests back to back. */
const READ_AHEAD = 2;

/**
 * The task's pages, read ahead of its writes: each page is listed as soon as the one before it
 * answered (its cursor is all the next list request needs) and at most READ_AHEAD pages past the
 * one being written, its associations read as soon as it is listed, so a chain waits on the source
 * one list request a page, whatever the writes cost, and a failed or stopped attempt loses at most
 * READ_AHEAD pages of requests. `written(i)` says page i is written. The promises are awaited in
 * order by the writes; a failure before then must not count as unhandled.
 */
function readAhead(
  ctx: TaskContext,
  client: HubSpotClient,
  type: ObjectType,
  properties: { batches: string[][]; custom: ReadonlySet<string> },
  pages: number,
): { page(i: number): Promise<ReadPage>; written(i: number): void; abandon(): void } {
  const start = ctx.task.cursor as unknown as ListCursor;
  const stop = new AbortController();
  const signal = AbortSignal.any([ctx.signal, stop.signal]);
  const writes = Array.from({ length: pages }, () => {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => {
      resolve = r;
    });
    return { promise, resolve };
  });
  const list = (after: string | null) =>
    readListPage(client, type, { after, archived: start.archived, batches: properties.batches }, signal);
  const out: Promise<ReadPage>[] = [];
  let listing: Promise<ListPage | null> = list(start.after);
  for (let i = 0; i < pages; i++) {
    const listed = listing;
    const page = listed.then(async (p) => {
      if (p === null) throw new Error("read past the list's end");
      return { after: p.after, rows: await pageRows(client, type, p.rows, properties.custom, signal) };
    });
    page.catch(() => {});
    out.push(page);
    // Page i + 1 is listed once page i answered and page i - READ_AHEAD is written: while page k
    // is written, pages k + 1 to k + READ_AHEAD may be read.
    const gate = i - READ_AHEAD >= 0 ? writes[i - READ_AHEAD]!.promise : Promise.resolve();
    // The task's last page hands its cursor on to a successor: nothing past it is read here.
    if (i + 1 < pages)
      listing = Promise.all([listed, gate]).then(([p]) =>
        p === null || p.after === null ? null : list(p.after),
      );
  }
  listing.catch(() => {});
  return {
    page: (i) => out[i]!,
    written: (i) => writes[i]?.resolve(),
    abandon: () => stop.abort(),
  };
}
