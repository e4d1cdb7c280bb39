import { PermanentError, type SourceClient } from "@drover/provider-sdk";
import { sourceId } from "./fields.js";
import { items, KIND_LISTS, type V2Envelope } from "./lists.js";
import { tokenCost } from "./token-costs.js";

/** GET /api/v2/<kind>?ids= takes "up to 100 entity ids" (Pipedrive's v2 reference). */
export const IDS_PER_REQUEST = 100;

/** A v2 list that takes `ids`. */
export interface IdsList {
  path: string;
  params?: Record<string, string>;
}

/**
 * The rows of `ids` a v2 list holds, a hundred ids a request, by id. The list leaves out what it does
 * not hold (an archived deal, a deleted row): "if any of the requested entities do not exist or are
 * not visible, they are not included", so the caller asks for those by id, or takes them as gone.
 * Ids that are not plain integers are not asked for. `attempt` wraps each request (retries);
 * `onPage` is called after each (a task's liveness).
 */
export async function rowsByIds(
  client: SourceClient,
  list: IdsList,
  ids: readonly string[],
  options: {
    signal?: AbortSignal | undefined;
    attempt?: <T>(request: () => Promise<T>) => Promise<T>;
    onPage?: () => void;
  } = {},
): Promise<Map<string, unknown>> {
  const attempt = options.attempt ?? ((request) => request());
  const numeric = ids.filter((id) => /^[1-9]\d{0,18}$/.test(id));
  const out = new Map<string, unknown>();
  for (let i = 0; i < numeric.length; i += IDS_PER_REQUEST) {
    const chunk = numeric.slice(i, i + IDS_PER_REQUEST);
    const asked = new Set(chunk);
    const body = await attempt(() =>
      client.getJson<V2Envelope>(
        list.path,
        { ...list.params, ids: chunk.join(","), limit: IDS_PER_REQUEST },
        "list",
        options.signal,
      ),
    );
    for (const raw of items(body)) {
      const id = sourceId(raw);
      if (id !== null && asked.has(id)) out.set(id, raw);
    }
    options.onPage?.();
  }
  return out;
}

/** How a kind's rows are read again: its `ids` list (v2 kinds), and a row by id. */
export interface RowReads {
  batch?: IdsList | undefined;
  fetch(id: string): { path: string; params?: Record<string, string | number> | undefined };
}

/**
 * Rows read again by id (re-drive): a hundred a request through each of the kind's v2 lists that
 * takes `ids` (the normal list, then the archived one for what it left out) wherever that costs
 * fewer tokens than a GET each (a v2 list 10 against 1 a row: from 11 rows; the archived deals 20:
 * from 21), the rest one GET by id. `gone`: the ids the source answers 404 for.
 */
export async function readRowsAgain(
  client: SourceClient,
  kind: string,
  reads: RowReads,
  ids: readonly string[],
  options: { signal?: AbortSignal; onRow?: () => void } = {},
): Promise<{ raws: Map<string, unknown>; gone: Set<string> }> {
  const raws = new Map<string, unknown>();
  const lists: IdsList[] = reads.batch
    ? [reads.batch, ...(KIND_LISTS[kind] ?? []).filter((l) => l.api === "v2" && l.path !== reads.batch!.path)]
    : [];
  for (const list of lists) {
    const left = ids.filter((id) => !raws.has(id) && /^[1-9]\d{0,18}$/.test(id));
    if (left.length === 0 || !cheaperInLists(list, reads, left)) continue;
    const found = await rowsByIds(client, list, left, {
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.onRow ? { onPage: options.onRow } : {}),
    });
    for (const [id, raw] of found) raws.set(id, raw);
  }
  const gone = new Set<string>();
  for (const id of ids) {
    if (raws.has(id)) continue;
    const { path, params } = reads.fetch(id);
    try {
      const body = await client.getJson<{ data?: unknown }>(path, params, "get", options.signal);
      if (typeof body?.data === "object" && body.data !== null) raws.set(id, body.data);
      else gone.add(id);
    } catch (err) {
      if (err instanceof PermanentError && / 404\b/.test(err.message)) gone.add(id);
      else throw err;
    }
    options.onRow?.();
  }
  return { raws, gone };
}

/** Whether `ids` cost fewer tokens asked of `list` a hundred at a time than one GET each. */
function cheaperInLists(list: IdsList, reads: RowReads, ids: readonly string[]): boolean {
  const requests = Math.ceil(ids.length / IDS_PER_REQUEST);
  return requests * tokenCost("list", list.path) < ids.length * tokenCost("get", reads.fetch(ids[0]!).path);
}
