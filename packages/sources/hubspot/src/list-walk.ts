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
): PagesAhead<ReadPage> {
  const start = ctx.task.cursor as unknown as ListCursor;
  return readPagesAhead(
    {
      list: (after, signal) =>
        readListPage(client, type, { after, archived: start.archived, batches: properties.batches }, signal),
      rows: async (page, signal) => ({
        after: page.after,
        rows: await pageRows(client, type, page.rows, properties.custom, signal),
      }),
    },
    start.after,
    pages,
    ctx.signal,
  );
}

export interface PagesAhead<T> {
  page(i: number): Promise<T>;
  written(i: number): void;
  abandon(): void;
}

/**
 * The scheduling of readAhead, apart from HubSpot's requests: `list` asks for a page at a cursor,
 * `rows` completes a listed page (its associations).
 */
export function readPagesAhead<T>(
  read: {
    list(after: string | null, signal: AbortSignal): Promise<ListPage | null>;
    rows(page: ListPage, signal: AbortSignal): Promise<T>;
  },
  from: string | null,
  pages: number,
  taskSignal: AbortSignal,
): PagesAhead<T> {
  const stop = new AbortController();
  const signal = AbortSignal.any([taskSignal, stop.signal]);
  const writes = Array.from({ length: pages }, () => {
    let resolve!: () => void;
    const write = { done: false, promise: new Promise<void>((r) => (resolve = r)), resolve: () => {} };
    write.resolve = () => {
      write.done = true;
      resolve();
    };
    return write;
  });
  const list = (after: string | null) => read.list(after, signal);
  const out: Promise<T>[] = [];
  let listing: Promise<ListPage | null> = list(from);
  for (let i = 0; i < pages; i++) {
    const listed = listing;
    // The task's last page hands its cursor on to a successor: nothing past it is read here.
    const next = i + 1 < pages ? deferred<ListPage | null>() : undefined;
    // Page i + 1 is listed once page i answered and page i - READ_AHEAD is written: while page k
    // is written, pages k + 1 to k + READ_AHEAD may be read.
    const gate = i - READ_AHEAD >= 0 ? writes[i - READ_AHEAD] : undefined;
    const page = listed.then(
      async (p) => {
        // The next page is asked for before this page's associations: the account's slots come one
        // after the other (the window's size apart), and the request that moves the chain on takes
        // the first, so a list walked alone waits one round trip a page, not two.
        if (next) {
          const after = p?.after ?? null;
          if (after === null) next.resolve(null);
          else if (!gate || gate.done) next.resolve(list(after));
          else next.resolve(gate.promise.then(() => list(after)));
        }
        if (p === null) throw new Error("read past the list's end");
        return read.rows(p, signal);
      },
      (err: unknown) => {
        next?.reject(err);
        throw err;
      },
    );
    page.catch(() => {});
    out.push(page);
    if (next) listing = next.promise;
  }
  listing.catch(() => {});
  return {
    page: (i) => out[i]!,
    written: (i) => writes[i]?.resolve(),
    abandon: () => stop.abort(),
  };
}

/** A promise and its settlers (Promise.withResolvers is Node 22's). */
function deferred<T>(): {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason: unknown) => void;
} {
  let resolve!: (value: T | PromiseLike<T>) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
