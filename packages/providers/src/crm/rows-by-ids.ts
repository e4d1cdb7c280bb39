import type { SourceClient } from "@drover/provider-sdk";
import { sourceId } from "./fields.js";
import { items, type V2Envelope } from "./lists.js";

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
