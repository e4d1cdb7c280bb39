import { TransientError } from "@drover/provider-sdk";
import { BATCH_READ_MAX, readByIds } from "./batch-read.js";
import type { HubSpotClient } from "./client.js";
import type { ObjectType } from "./object-types.js";
import { propertyBatches } from "./properties.js";
import { type HubSpotRecord, mergeProperties, parseRows, type ReadRow } from "./records.js";

/** `limit` of a list: at most 100 (CRM objects API, `GET /crm/v3/objects/{objectType}`). */
export const LIST_PAGE_MAX = 100;

/**
 * Room a cursor is given in the URL: HubSpot documents `after` only as "the paging cursor token",
 * so its length is not known in advance; the sandbox's is an id (11 digits).
 */
const CURSOR_ROOM = 128;

/** Where a list page starts: null for the first page, else the `after` the previous page gave, verbatim. */
export type ListCursor = string | null;

export interface ListPage {
  rows: ReadRow[];
  /** The next page's cursor; null at the list's end. */
  after: ListCursor;
  /** Requests the page took (one per batch of properties, and any read again by id). */
  requests: number;
}

interface ListAnswer {
  results?: unknown[];
  paging?: { next?: { after?: unknown } };
}

/**
 * How a type's list is read: its properties cut into batches that keep every request URL under the
 * client's limit, whatever the cursor. Computed once per type and run.
 */
export function listBatches(
  client: HubSpotClient,
  type: ObjectType,
  properties: readonly string[],
): string[][] {
  const fixed = client.urlLength(`/crm/v3/objects/${type}`, {
    limit: LIST_PAGE_MAX,
    archived: "false",
    after: "x".repeat(CURSOR_ROOM),
    properties: "",
  });
  return properties.length === 0 ? [[]] : propertyBatches(properties, client.maxUrlLength - fixed);
}

/**
 * One page of a type's live records (or, `archived`, of its archived ones: what the source has
 * deleted, flagged so on each record). The page is asked once per batch of properties, at the same
 * cursor (HubSpot's lists are in id order: the same cursor gives the same records), and each
 * record's properties are merged. A record of the first answer that a later one lacks (archived or
 * changed between the two requests) has that batch read by id; if it is gone by then, the page is
 * read again later (transient) rather than kept with properties missing.
 */
export async function readListPage(
  client: HubSpotClient,
  type: ObjectType,
  at: { after: ListCursor; archived: boolean; batches: readonly (readonly string[])[] },
  signal?: AbortSignal,
): Promise<ListPage> {
  const path = `/crm/v3/objects/${type}`;
  const base = { limit: LIST_PAGE_MAX, archived: String(at.archived), after: at.after ?? undefined };
  // The batches ask the same cursor, so they go out side by side: a page costs one round trip.
  const answers = await Promise.all(
    at.batches.map((batch) =>
      client.get<ListAnswer>(
        path,
        { ...base, properties: batch.length > 0 ? batch.join(",") : undefined },
        "list",
        signal,
      ),
    ),
  );
  let requests = answers.length;
  const [first, ...later] = answers.map((a) => parseRows(Array.isArray(a?.results) ? a.results : []));
  const rows = first ?? [];
  const after = answers[0]?.paging?.next?.after;
  const next = typeof after === "string" && after !== "" && after !== at.after ? after : null;
  const byId = new Map<string, HubSpotRecord>();
  for (const row of rows) if ("record" in row) byId.set(row.record.id, row.record);
  for (const [i, parsed] of later.entries()) {
    const seen = new Set<string>();
    for (const row of parsed) {
      const record = "record" in row ? byId.get(row.record.id) : undefined;
      if (record && "record" in row) {
        mergeProperties(record, row.record);
        seen.add(record.id);
      }
    }
    const lacking = [...byId.keys()].filter((id) => !seen.has(id));
    const batch = at.batches[i + 1] ?? [];
    if (lacking.length > 0)
      requests += await completeByIds(client, type, at.archived, batch, lacking, byId, signal);
  }
  return { rows, after: next, requests };
}

async function completeByIds(
  client: HubSpotClient,
  type: ObjectType,
  archived: boolean,
  batch: readonly string[],
  ids: string[],
  byId: Map<string, HubSpotRecord>,
  signal?: AbortSignal,
): Promise<number> {
  const { rows, misses } = await readByIds(client, type, ids, {
    properties: batch,
    archived,
    ...(signal ? { signal } : {}),
  });
  for (const row of rows) {
    const record = "record" in row ? byId.get(row.record.id) : undefined;
    if (record && "record" in row) mergeProperties(record, row.record);
  }
  if (misses.length > 0)
    throw new TransientError(
      `/crm/v3/objects/${type}: ${misses.length} record(s) of the page changed between its property batches; the page is read again`,
    );
  return Math.ceil(ids.length / BATCH_READ_MAX);
}

/**
 * Every record of a type's list, live or archived, page after page (each page names the next: the
 * cursor cannot be computed). Verification and tests read whole lists; the import reads one page a
 * task step, its checkpoint the cursor.
 */
export async function readWholeList(
  client: HubSpotClient,
  type: ObjectType,
  options: { archived: boolean; batches: readonly (readonly string[])[]; signal?: AbortSignal },
): Promise<ReadRow[]> {
  const rows: ReadRow[] = [];
  let after: ListCursor = null;
  for (;;) {
    const page = await readListPage(
      client,
      type,
      { after, archived: options.archived, batches: options.batches },
      options.signal,
    );
    rows.push(...page.rows);
    if (page.after === null) return rows;
    after = page.after;
  }
}

const ID_ONLY = [["hs_object_id"]];

/**
 * Every id of a type's list, live or archived, a page of 100 at a time asking only the id (a
 * malformed record still names its id). `readPage` wraps each page's read (the verifier retries it
 * in place; a task leaves that to its attempt); `onPage` is told after each page.
 */
export async function listIds(
  client: HubSpotClient,
  type: ObjectType,
  archived: boolean,
  options: {
    signal?: AbortSignal;
    readPage?: (read: () => Promise<ListPage>) => Promise<ListPage>;
    onPage?: () => void;
  } = {},
): Promise<string[]> {
  const readPage = options.readPage ?? ((read) => read());
  const ids: string[] = [];
  let after: ListCursor = null;
  do {
    const at: ListCursor = after;
    const page = await readPage(() =>
      readListPage(client, type, { after: at, archived, batches: ID_ONLY }, options.signal),
    );
    for (const row of page.rows) {
      if ("record" in row) ids.push(row.record.id);
      else {
        const raw = row.raw as { id?: unknown } | null;
        if (typeof raw?.id === "string" && raw.id !== "") ids.push(raw.id);
      }
    }
    options.onPage?.();
    after = page.after;
  } while (after !== null);
  return ids;
}
