import type { HubSpotClient } from "./client.js";
import type { ObjectType } from "./object-types.js";
import { parseRows, type ReadRow } from "./records.js";

/** Inputs of one `POST /crm/v3/objects/{type}/batch/read`: at most 100. */
export const BATCH_READ_MAX = 100;

/** An id asked for and not answered: the error's category (OBJECT_NOT_FOUND: deleted, or never was). */
export interface BatchMiss {
  id: string;
  category: string;
  message: string;
}

export interface BatchRead {
  rows: ReadRow[];
  /** Every asked id the answers did not hold, whatever said so (a 207's errors, or silence). */
  misses: BatchMiss[];
}

interface BatchAnswer {
  results?: unknown[];
  numErrors?: number;
  errors?: { category?: unknown; message?: unknown; context?: { ids?: unknown } }[];
}

/**
 * Records by id, a hundred a request, for re-reads and verification. Properties travel in the body
 * (no URL limit). Ids some records of which HubSpot cannot find come back as a 207 ("multi-status"):
 * the records it found, and errors naming the rest (`context.ids`). That is a partial success, not a
 * failure: the found rows are used and each missing id is a miss of its own, for the caller to take
 * as gone or to note. `archived` reads the archived records instead of the live ones.
 */
export async function readByIds(
  client: HubSpotClient,
  type: ObjectType,
  ids: readonly string[],
  options: { properties: readonly string[]; archived?: boolean; signal?: AbortSignal },
): Promise<BatchRead> {
  const rows: ReadRow[] = [];
  const misses: BatchMiss[] = [];
  const unique = [...new Set(ids)];
  for (let i = 0; i < unique.length; i += BATCH_READ_MAX) {
    const chunk = unique.slice(i, i + BATCH_READ_MAX);
    const query = options.archived ? "?archived=true" : "";
    const answer = await client.post<BatchAnswer>(
      `/crm/v3/objects/${type}/batch/read${query}`,
      { inputs: chunk.map((id) => ({ id })), properties: options.properties },
      "get",
      options.signal,
    );
    const parsed = parseRows(Array.isArray(answer?.results) ? answer.results : []);
    rows.push(...parsed);
    const answered = new Set(parsed.flatMap((r) => ("record" in r ? [r.record.id] : [])));
    const named = new Map<string, BatchMiss>();
    for (const error of Array.isArray(answer?.errors) ? answer.errors : []) {
      const category = typeof error?.category === "string" ? error.category : "UNKNOWN";
      const message = typeof error?.message === "string" ? error.message : "";
      const errorIds = Array.isArray(error?.context?.ids) ? error.context.ids : [];
      for (const id of errorIds) named.set(String(id), { id: String(id), category, message });
    }
    for (const id of chunk) {
      if (answered.has(id)) continue;
      misses.push(named.get(id) ?? { id, category: "NOT_ANSWERED", message: "the answer left it out" });
    }
  }
  return { rows, misses };
}
