import type { SourceClient } from "@drover/provider-sdk";
import { items, type SourceList, type V1Envelope, type V2Envelope, v1Pagination } from "./lists.js";

/**
 * The one place that knows how each Pipedrive API pages a list: v2 by an opaque cursor
 * (`additional_data.next_cursor`, null at the end), v1 by `start`/`limit` with
 * `more_items_in_collection`. The import reads one page per task (its checkpoint is where the next
 * page starts) and verification reads whole lists; both go through here, so they cannot disagree
 * on where a list ends.
 */

/** Where a page starts: a v2 list's cursor (null: the first page), a v1 list's offset. */
export interface PagePosition {
  cursor?: string | null;
  start?: number;
}

export interface ListPage {
  rows: unknown[];
  /** v2: the cursor of the next page, null at the end. */
  nextCursor: string | null;
  /** Whether the list goes on past this page. */
  more: boolean;
}

/** Wraps each page request, e.g. to retry transient failures (verification); the import retries whole tasks. */
export type PageAttempt = <T>(request: () => Promise<T>) => Promise<T>;
const once: PageAttempt = (request) => request();

/**
 * One page of `list` at `at`. `filters` are the list's extra parameters (`updated_since`, …).
 * A v2 page may be empty and still point on; a cursor that points back at itself would loop
 * forever, so it ends the list.
 */
export async function readListPage(
  client: SourceClient,
  list: SourceList,
  at: PagePosition,
  limit: number,
  options: { filters?: Record<string, string | undefined>; signal?: AbortSignal; attempt?: PageAttempt } = {},
): Promise<ListPage> {
  const attempt = options.attempt ?? once;
  if (list.api === "v2") {
    const cursor = at.cursor ?? null;
    const body = await attempt(() =>
      client.getJson<V2Envelope>(
        list.path,
        { ...list.params, ...options.filters, limit, ...(cursor ? { cursor } : {}) },
        "list",
        options.signal,
      ),
    );
    const next = body?.additional_data?.next_cursor;
    const nextCursor = typeof next === "string" && next !== "" && next !== cursor ? next : null;
    return { rows: items(body), nextCursor, more: nextCursor !== null };
  }
  const body = await attempt(() =>
    client.getJson<V1Envelope>(
      list.path,
      { ...list.params, ...options.filters, start: at.start ?? 0, limit },
      "list",
      options.signal,
    ),
  );
  const rows = items(body);
  // An empty page ends the list even if it claims more: nothing past it could be reached.
  return {
    rows,
    nextCursor: null,
    more: v1Pagination(body)?.more_items_in_collection === true && rows.length > 0,
  };
}

/**
 * Every row of `list`, page by page. v2 pages must be read one after the other (each names the
 * next); v1 pages are addressed by offset, but a page read ahead of what the list has shown comes
 * back empty past its end, a whole page's tokens for nothing. So the first two pages are read one
 * by one (most lists fit in them), and only a list whose second page came back full is read
 * `pagesAtOnce` pages side by side, at most 2: where it ends, at most one page comes back empty.
 */
export async function readWholeList(
  client: SourceClient,
  list: SourceList,
  limit: number,
  options: {
    signal?: AbortSignal;
    attempt?: PageAttempt;
    pagesAtOnce?: number;
    filters?: Record<string, string | undefined>;
  } = {},
): Promise<unknown[]> {
  const rows: unknown[] = [];
  if (list.api === "v2") {
    let cursor: string | null = null;
    for (;;) {
      const page = await readListPage(client, list, { cursor }, limit, options);
      rows.push(...page.rows);
      if (!page.more) return rows;
      cursor = page.nextCursor;
    }
  }
  const pageAt = (index: number) => readListPage(client, list, { start: index * limit }, limit, options);
  for (const index of [0, 1]) {
    const page = await pageAt(index);
    rows.push(...page.rows);
    if (!page.more) return rows;
  }
  const width = Math.min(MAX_PAGES_AHEAD, Math.max(1, options.pagesAtOnce ?? 1));
  for (let next = 2; ; next += width) {
    const pages = await Promise.all(Array.from({ length: width }, (_, i) => pageAt(next + i)));
    for (const page of pages) {
      rows.push(...page.rows);
      if (!page.more) return rows;
    }
  }
}

/** v1 pages read side by side at most: each more would read one more empty page past a list's end. */
const MAX_PAGES_AHEAD = 2;
