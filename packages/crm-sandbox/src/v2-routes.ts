import {
  type ApiResult,
  type ApiRoute,
  badRequest,
  DEFAULT_LIMIT,
  MAX_LIMIT,
  notFound,
} from "./api-routes.js";
import { type Dataset, GENERATED_UNTIL_MS, type Row, type RowKind } from "./dataset.js";
import { toV2 } from "./v2-shape.js";

/** The kinds Pipedrive serves from /api/v2 since 2026 (their v1 lists are retired). */
const V2_KINDS = ["organizations", "persons", "deals", "activities"] as const;
type V2Kind = (typeof V2_KINDS)[number];
const isV2Kind = (s: string | undefined): s is V2Kind => (V2_KINDS as readonly string[]).includes(s ?? "");

const SINGULAR: Record<V2Kind, string> = {
  organizations: "Organization",
  persons: "Person",
  deals: "Deal",
  activities: "Activity",
};

const DEAL_STATUSES = new Set(["open", "won", "lost", "deleted"]);

/** The cursor is opaque to clients; here it is the next list position, base64url-encoded. */
const encodeCursor = (position: number) => Buffer.from(JSON.stringify({ p: position })).toString("base64url");

function decodeCursor(raw: string): number | undefined {
  try {
    const p = (JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as { p?: unknown }).p;
    return typeof p === "number" && Number.isInteger(p) && p >= 0 ? p : undefined;
  } catch {
    return undefined;
  }
}

interface ListQuery {
  limit: number;
  from: number;
  sinceMs: number | null;
  statuses: Set<string>;
}

function parseQuery(query: URLSearchParams, kind: V2Kind): ListQuery | string {
  const limitRaw = query.get("limit");
  if (limitRaw !== null && !/^\d+$/.test(limitRaw)) return "limit must be a positive integer";
  const limit = limitRaw === null ? DEFAULT_LIMIT : Number(limitRaw);
  if (limit < 1 || limit > MAX_LIMIT) return `limit must be between 1 and ${MAX_LIMIT}`;
  const cursorRaw = query.get("cursor");
  const from = cursorRaw === null || cursorRaw === "" ? 0 : decodeCursor(cursorRaw);
  if (from === undefined) return "cursor is not valid";
  const sinceRaw = query.get("updated_since");
  let sinceMs: number | null = null;
  if (sinceRaw !== null) {
    sinceMs = Date.parse(sinceRaw);
    if (Number.isNaN(sinceMs)) return "updated_since must be an RFC 3339 date-time";
  }
  const statuses = new Set(["open", "won", "lost"]);
  const statusRaw = query.get("status");
  if (kind === "deals" && statusRaw !== null) {
    statuses.clear();
    for (const s of statusRaw.split(",")) {
      if (!DEAL_STATUSES.has(s)) return `status "${s}" is not one of open, won, lost, deleted`;
      statuses.add(s);
    }
  }
  return { limit, from, sinceMs, statuses };
}

/**
 * A v2 list: `{success, data, additional_data: {next_cursor}}`, next_cursor null at the end.
 * `archived` serves /api/v2/deals/archived; normal deal lists never hold archived deals, and hold
 * deleted ones only when status asks for `deleted`.
 */
function listV2(ds: Dataset, kind: V2Kind, query: URLSearchParams, archived: boolean): ApiResult {
  const q = parseQuery(query, kind);
  if (typeof q === "string") return badRequest(q);
  const total = ds.count(kind);
  // A recent updated_since can only match the change set: look at those ids alone.
  const onlyChanged = q.sinceMs !== null && q.sinceMs > GENERATED_UNTIL_MS;
  const candidates = onlyChanged
    ? [...new Set([...ds.editedIds(kind), ...ds.addedIds(kind)])].sort((a, b) => a - b).map((id) => id - 1)
    : null;
  const data: Row[] = [];
  let position = q.from;
  const end = candidates ? candidates.length : total;
  for (; position < end && data.length < q.limit; position++) {
    const index = candidates ? (candidates[position] as number) : position;
    const id = index + 1;
    if (q.sinceMs !== null && ds.updateTimeMs(kind, id) < q.sinceMs) continue;
    if (kind === "deals") {
      if (ds.isArchived("deals", id) !== archived) continue;
      const row = ds.rowAt(kind, index);
      const status = ds.isDeletedDeal(id) ? "deleted" : String(row.status);
      if (!q.statuses.has(status) && !(archived && status !== "deleted")) continue;
      data.push(toV2(ds, kind, row));
      continue;
    }
    data.push(toV2(ds, kind, ds.rowAt(kind, index)));
  }
  return {
    status: 200,
    body: {
      success: true,
      data,
      additional_data: { next_cursor: position < end ? encodeCursor(position) : null },
    },
  };
}

function getV2(ds: Dataset, kind: V2Kind, rawId: string): ApiResult {
  const row = ds.findRow(kind as RowKind, rawId);
  return row ? { status: 200, body: { success: true, data: toV2(ds, kind, row) } } : notFound(SINGULAR[kind]);
}

/** Resolves an /api/v2 path (segments after "v2") to its call type and handler. */
export function matchV2Route(
  ds: Dataset,
  method: string,
  segments: string[],
  query: URLSearchParams,
): ApiRoute {
  const unknown: ApiRoute = { callType: null, run: () => notFound("Endpoint") };
  const [first, second, ...rest] = segments;
  if (method !== "GET" || rest.length > 0 || !isV2Kind(first)) return unknown;
  const kind = first;
  if (second === undefined) return { callType: "list", run: () => listV2(ds, kind, query, false) };
  if (kind === "deals" && second === "archived")
    return { callType: "list", run: () => listV2(ds, kind, query, true) };
  return { callType: "get", run: () => getV2(ds, kind, second) };
}
