import { TransientError } from "@drover/provider-sdk";
import type { HubSpotClient } from "./client.js";
import { modifiedProperty, type ObjectType } from "./object-types.js";
import { parseRows, type ReadRow } from "./records.js";

/** `limit` of a search: at most 200 (changelog "Increasing our API limits"). */
export const SEARCH_PAGE_MAX = 200;
/**
 * "The search endpoints are limited to 10,000 total results for any given query. Attempting to page
 * beyond 10,000 will result in a 400 error" (search guide, Limitations). Rows past it are lost to a
 * reader that trusts the pages: the importers' most reported HubSpot defect.
 */
export const SEARCH_CAP = 10_000;

/** Records modified in `[since, until)` (epoch ms). */
export interface ChangeWindow {
  since: number;
  until: number;
}

/** Where a window's walk is: the last id read (records are read in id order within a window). */
export interface ChangePage {
  window: ChangeWindow;
  rows: ReadRow[];
  /** The last id this page read: the walk goes on after it; null once the window is read. */
  lastId: string | null;
}

interface SearchAnswer {
  total?: unknown;
  results?: unknown[];
}

/**
 * The search of one window after `afterId`, in id order. Within a window the walk is by keyset
 * (`hs_object_id > last id`, sorted by id, always from the first result), never by HubSpot's offset
 * `after`: no page ever reaches past the 10,000th result, a record whose modification moves it out
 * of the window while it is walked shifts no other record past a page boundary (an offset would skip
 * one), and records that all share one modification time are still read one page after the other.
 */
async function searchWindow(
  client: HubSpotClient,
  type: ObjectType,
  window: ChangeWindow,
  afterId: string,
  properties: readonly string[],
  signal?: AbortSignal,
): Promise<{ total: number; rows: ReadRow[] }> {
  const modified = modifiedProperty(type);
  const answer = await client.search<SearchAnswer>(
    `/crm/v3/objects/${type}/search`,
    {
      filterGroups: [
        {
          filters: [
            { propertyName: modified, operator: "GTE", value: String(window.since) },
            { propertyName: modified, operator: "LT", value: String(window.until) },
            { propertyName: "hs_object_id", operator: "GT", value: afterId },
          ],
        },
      ],
      sorts: [{ propertyName: "hs_object_id", direction: "ASCENDING" }],
      properties,
      limit: SEARCH_PAGE_MAX,
    },
    signal,
  );
  const total = typeof answer?.total === "number" ? answer.total : Number.NaN;
  if (!Number.isFinite(total) || !Array.isArray(answer?.results))
    throw new TransientError(`/crm/v3/objects/${type}/search: the answer has no total or results`);
  return { total, rows: parseRows(answer.results) };
}

/**
 * Every live record of `type` modified in `window`, page by page: the catch-up and a follow pass.
 * A window whose first search says it holds more than the cap is split in half, each half walked
 * in turn, so a window never needs more than 10,000 results of one query (the keyset walk would
 * not, but HubSpot counts `total` for a query, and a window of bounded size is what a task can
 * checkpoint and resume). A window one millisecond wide cannot be split: its records all share one
 * modification time (a bulk edit, an import), and the keyset walk reads them all however many.
 * `from` resumes a walk: the window it was in and the last id it read.
 */
export async function* changedRecords(
  client: HubSpotClient,
  type: ObjectType,
  window: ChangeWindow,
  options: {
    properties: readonly string[];
    signal?: AbortSignal;
    from?: { window: ChangeWindow; lastId: string };
  },
): AsyncGenerator<ChangePage> {
  const pending: ChangeWindow[] = [window];
  let resume = options.from;
  while (pending.length > 0) {
    const current = pending.shift() as ChangeWindow;
    if (resume && current.until <= resume.window.since) continue;
    let afterId = "0";
    if (resume && current.since === resume.window.since && current.until === resume.window.until) {
      afterId = resume.lastId;
      resume = undefined;
    }
    const first = await searchWindow(client, type, current, afterId, options.properties, options.signal);
    if (afterId === "0" && first.total > SEARCH_CAP && current.until - current.since > 1) {
      const middle = current.since + Math.floor((current.until - current.since) / 2);
      pending.unshift({ since: current.since, until: middle }, { since: middle, until: current.until });
      continue;
    }
    yield* walkWindow(client, type, current, first.rows, options);
  }
}

async function* walkWindow(
  client: HubSpotClient,
  type: ObjectType,
  window: ChangeWindow,
  firstRows: ReadRow[],
  options: { properties: readonly string[]; signal?: AbortSignal },
): AsyncGenerator<ChangePage> {
  let rows = firstRows;
  for (;;) {
    const lastId = lastIdOf(rows);
    const full = rows.length >= SEARCH_PAGE_MAX && lastId !== null;
    yield { window, rows, lastId: full ? lastId : null };
    if (!full) return;
    rows = (await searchWindow(client, type, window, lastId, options.properties, options.signal)).rows;
  }
}

/** The greatest id of a page's records (a malformed row has none to go on from). */
function lastIdOf(rows: readonly ReadRow[]): string | null {
  let last: bigint | null = null;
  for (const row of rows) {
    if (!("record" in row)) continue;
    const id = BigInt(row.record.id);
    if (last === null || id > last) last = id;
  }
  return last === null ? null : String(last);
}
