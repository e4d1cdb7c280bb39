import {
  type ApiResult,
  type ApiRoute,
  badRequest,
  DEFAULT_LIMIT,
  MAX_LIMIT,
  notFound,
} from "./api-routes.js";
import { type Dataset, GENERATED_UNTIL_MS, type Row, type RowKind } from "./dataset.js";
import { parseTime } from "./time-format.js";
import { firstAfter, ordering, SORT_KEYS, type SortBy } from "./v2-order.js";
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

/**
 * The cursor is opaque to clients. For the default order (id ascending) it is the next list
 * position; for any other order it is the (key, id) of the last row looked at, so a walk resumes
 * right after it even when the change set has since moved rows or added some. Either way it is
 * base64url JSON, and it names its order: a cursor is only valid for the query that produced it.
 */
interface Cursor {
  p?: number;
  s?: SortBy;
  d?: boolean;
  k?: number;
  i?: number;
}
const encodeCursor = (c: Cursor) => Buffer.from(JSON.stringify(c)).toString("base64url");

function decodeCursor(raw: string): Cursor | undefined {
  try {
    const c = JSON.parse(Buffer.from(raw, "base64url").toString("utf8")) as Cursor;
    if (typeof c !== "object" || c === null) return undefined;
    if (c.p !== undefined) return Number.isInteger(c.p) && c.p >= 0 ? { p: c.p } : undefined;
    const ok =
      SORT_KEYS.includes(c.s as SortBy) &&
      typeof c.d === "boolean" &&
      Number.isFinite(c.k) &&
      Number.isInteger(c.i);
    return ok ? { s: c.s, d: c.d, k: c.k, i: c.i } : undefined;
  } catch {
    return undefined;
  }
}

/** RFC 3339 as Pipedrive's v2 filters take it (`2025-01-01T10:20:00Z`, fraction and offset allowed). */
interface ListQuery {
  limit: number;
  cursor: Cursor;
  /** Inclusive: update_time >= since. */
  sinceMs: number | null;
  /** Exclusive: update_time < until. */
  untilMs: number | null;
  sortBy: SortBy;
  desc: boolean;
  statuses: Set<string>;
  /** `ids`: only these rows, "up to 100 entity ids" (Pipedrive's v2 list reference). */
  ids: number[] | null;
  /** Deals carry `email_messages_count` (include_fields). */
  mailCounts: boolean;
}

const MAX_IDS = 100;

/** `include_fields` of the v2 deal lists, as Pipedrive's reference enumerates them. */
const DEAL_INCLUDE_FIELDS = new Set([
  "next_activity_id",
  "last_activity_id",
  "first_won_time",
  "products_count",
  "files_count",
  "notes_count",
  "followers_count",
  "email_messages_count",
  "activities_count",
  "done_activities_count",
  "undone_activities_count",
  "participants_count",
  "last_incoming_mail_time",
  "last_outgoing_mail_time",
  "smart_bcc_email",
  "source_lead_id",
]);

/**
 * Whether a deal list's `include_fields` asks for `email_messages_count`, or why it is refused.
 * Of the fields it may name the sandbox adds only that one (the only one the crm provider asks for).
 */
function mailCountsAsked(ds: Dataset, query: URLSearchParams): boolean | string {
  const raw = query.get("include_fields");
  if (raw === null || raw === "") return false;
  if (ds.dealMailCounts === "refused") return "include_fields is not supported";
  const unknown = raw.split(",").find((f) => !DEAL_INCLUDE_FIELDS.has(f));
  if (unknown !== undefined) return `include_fields: "${unknown}" is not a field that can be included`;
  return ds.dealMailCounts === "answered" && raw.split(",").includes("email_messages_count");
}

function parseQuery(ds: Dataset, query: URLSearchParams, kind: V2Kind): ListQuery | string {
  const limitRaw = query.get("limit");
  if (limitRaw !== null && !/^\d+$/.test(limitRaw)) return "limit must be a positive integer";
  const limit = limitRaw === null ? DEFAULT_LIMIT : Number(limitRaw);
  if (limit < 1 || limit > MAX_LIMIT) return `limit must be between 1 and ${MAX_LIMIT}`;
  const sinceMs = parseTime(query, "updated_since");
  if (typeof sinceMs === "string") return sinceMs;
  const untilMs = parseTime(query, "updated_until");
  if (typeof untilMs === "string") return untilMs;
  const sortRaw = query.get("sort_by") ?? "id";
  if (!SORT_KEYS.includes(sortRaw as SortBy)) return `sort_by must be one of ${SORT_KEYS.join(", ")}`;
  const sortBy = sortRaw as SortBy;
  const directionRaw = query.get("sort_direction") ?? "asc";
  if (directionRaw !== "asc" && directionRaw !== "desc") return "sort_direction must be asc or desc";
  const desc = directionRaw === "desc";
  const cursorRaw = query.get("cursor");
  const cursor = cursorRaw === null || cursorRaw === "" ? { p: 0 } : decodeCursor(cursorRaw);
  if (cursor === undefined) return "cursor is not valid";
  const defaultOrder = sortBy === "id" && !desc;
  if (cursorRaw && (cursor.p !== undefined) !== defaultOrder) return "cursor is not valid for this sort";
  if (cursor.p === undefined && (cursor.s !== sortBy || cursor.d !== desc))
    return "cursor is not valid for this sort";
  const statuses = new Set(["open", "won", "lost"]);
  const statusRaw = query.get("status");
  if (kind === "deals" && statusRaw !== null) {
    statuses.clear();
    for (const s of statusRaw.split(",")) {
      if (!DEAL_STATUSES.has(s)) return `status "${s}" is not one of open, won, lost, deleted`;
      statuses.add(s);
    }
  }
  let ids: number[] | null = null;
  const idsRaw = query.get("ids");
  if (idsRaw !== null && idsRaw !== "") {
    const parts = idsRaw.split(",");
    if (parts.length > MAX_IDS || parts.some((p) => !/^[1-9]\d{0,15}$/.test(p)))
      return `ids must be a comma separated list of up to ${MAX_IDS} entity ids`;
    ids = [...new Set(parts.map(Number))].sort((a, b) => a - b);
  }
  const mailCounts = kind === "deals" ? mailCountsAsked(ds, query) : false;
  if (typeof mailCounts === "string") return mailCounts;
  return { limit, cursor, sinceMs, untilMs, sortBy, desc, statuses, ids, mailCounts };
}

/** The row as this list shows it, or undefined when the list's filters leave it out. */
function listed(ds: Dataset, kind: V2Kind, q: ListQuery, id: number, archived: boolean): Row | undefined {
  if (q.sinceMs !== null || q.untilMs !== null) {
    const updated = ds.updateTimeMs(kind, id);
    if (q.sinceMs !== null && updated < q.sinceMs) return undefined;
    if (q.untilMs !== null && updated >= q.untilMs) return undefined;
  }
  // A deleted row (other than a deal) is in no list, `ids` lists included.
  if (ds.isGone(kind, id)) return undefined;
  const row = ds.rowAt(kind, id - 1);
  if (kind === "deals") {
    if (ds.isArchived("deals", id) !== archived) return undefined;
    const status = ds.isDeletedDeal(id) ? "deleted" : String(row.status);
    if (!q.statuses.has(status) && !(archived && status !== "deleted")) return undefined;
  }
  const shown = toV2(ds, kind, row);
  // The messages the deal's mail list holds: the list and the count cannot disagree.
  if (q.mailCounts) shown.email_messages_count = ds.mail.countFor(id);
  return shown;
}

const page = (data: Row[], next: Cursor | null): ApiResult => ({
  status: 200,
  body: { success: true, data, additional_data: { next_cursor: next ? encodeCursor(next) : null } },
});

/**
 * A v2 list: `{success, data, additional_data: {next_cursor}}`, next_cursor null at the end.
 * `archived` serves /api/v2/deals/archived; normal deal lists never hold archived deals, and hold
 * deleted ones only when status asks for `deleted`.
 */
function listV2(ds: Dataset, kind: V2Kind, query: URLSearchParams, archived: boolean): ApiResult {
  const q = parseQuery(ds, query, kind);
  if (typeof q === "string") return badRequest(q);
  if (q.cursor.p === undefined || q.sortBy !== "id" || q.desc) return listOrdered(ds, kind, q, archived);
  const total = ds.count(kind);
  // A recent updated_since can only match the change set: look at those ids alone.
  const onlyChanged = q.sinceMs !== null && q.sinceMs > GENERATED_UNTIL_MS;
  // Ids the list does not hold (or hides from this list) are left out, as Pipedrive documents:
  // "If any of the requested entities do not exist or are not visible, they are not included".
  const candidates = q.ids
    ? q.ids.filter((id) => id <= total).map((id) => id - 1)
    : onlyChanged
      ? [
          ...new Set([
            ...ds.editedIds(kind),
            ...ds.addedIds(kind),
            ...(kind === "deals" ? ds.deletedByChanges() : []),
          ]),
        ]
          .sort((a, b) => a - b)
          .map((id) => id - 1)
      : null;
  const data: Row[] = [];
  let position = q.cursor.p;
  const end = candidates ? candidates.length : total;
  for (; position < end && data.length < q.limit; position++) {
    const index = candidates ? (candidates[position] as number) : position;
    const row = listed(ds, kind, q, index + 1, archived);
    if (row) data.push(row);
  }
  return page(data, position < end ? { p: position } : null);
}

/** Any order but the default: walks the kind's (key, id) ordering, narrowed by the update_time range when sorted on it. */
function listOrdered(ds: Dataset, kind: V2Kind, q: ListQuery, archived: boolean): ApiResult {
  const o = ordering(ds, kind, q.sortBy);
  let lo = 0;
  let hi = o.ids.length;
  if (q.sortBy === "update_time") {
    // (key, 0) sorts before every row with that key: the first position with key >= the bound.
    if (q.sinceMs !== null) lo = firstAfter(o, q.sinceMs, 0);
    if (q.untilMs !== null) hi = Math.max(lo, firstAfter(o, q.untilMs, 0));
  }
  const c = q.cursor;
  const resumed = c.p === undefined;
  // Descending resumes at the last position before (k, i): ids are integers, so (k, i - 1) bounds it.
  let position = q.desc
    ? Math.min(hi, resumed ? firstAfter(o, c.k as number, (c.i as number) - 1) : hi) - 1
    : Math.max(lo, resumed ? firstAfter(o, c.k as number, c.i as number) : lo);
  const step = q.desc ? -1 : 1;
  const inRange = (p: number) => p >= lo && p < hi;
  const data: Row[] = [];
  let last: number | undefined;
  for (; inRange(position) && data.length < q.limit; position += step) {
    last = position;
    const row = listed(ds, kind, q, o.ids[position] as number, archived);
    if (row) data.push(row);
  }
  const next =
    inRange(position) && last !== undefined
      ? { s: q.sortBy, d: q.desc, k: o.keys[last] as number, i: o.ids[last] as number }
      : null;
  return page(data, next);
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
  const unknown: ApiRoute = { callType: null, endpoint: null, run: () => notFound("Endpoint") };
  const [first, second, ...rest] = segments;
  if (method !== "GET" || rest.length > 0 || !isV2Kind(first)) return unknown;
  const kind = first;
  const list = `/api/v2/${kind}`;
  if (second === undefined)
    return { callType: "list", endpoint: list, run: () => listV2(ds, kind, query, false) };
  if (kind === "deals" && second === "archived")
    return { callType: "list", endpoint: `${list}/archived`, run: () => listV2(ds, kind, query, true) };
  return { callType: "get", endpoint: `${list}/{id}`, run: () => getV2(ds, kind, second) };
}
