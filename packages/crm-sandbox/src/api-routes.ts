import { type Dataset, GENERATED_UNTIL_MS, ROW_KINDS, type Row, type RowKind } from "./dataset.js";
import type { CallType } from "./options.js";
import { parseTime } from "./time-format.js";
import { TOKEN_OWNER_ID } from "./words.js";

export interface ApiResult {
  status: number;
  body: unknown;
}

export interface ApiRoute {
  /** null for paths the API does not know: those cost nothing. */
  callType: CallType | null;
  /** The operation as ENDPOINT_COSTS names it (`/v1/leads/{id}`), which prices it; null with callType. */
  endpoint: string | null;
  run(): ApiResult;
}

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 500;

const SINGULAR: Record<RowKind, string> = {
  organizations: "Organization",
  persons: "Person",
  deals: "Deal",
  leads: "Lead",
  activities: "Activity",
  notes: "Note",
};

export const notFound = (what: string): ApiResult => ({
  status: 404,
  body: {
    success: false,
    error: `${what} not found`,
    error_info: "Please check developers.pipedrive.com for more information.",
    data: null,
    additional_data: null,
  },
});

export const badRequest = (error: string): ApiResult => ({
  status: 400,
  body: { success: false, error, error_info: "Please check developers.pipedrive.com for more information." },
});

interface Page {
  start: number;
  limit: number;
}

function parsePage(query: URLSearchParams): Page | string {
  const start = query.get("start");
  const limit = query.get("limit");
  if (start !== null && !/^\d+$/.test(start)) return "start must be a non-negative integer";
  if (limit !== null && !/^\d+$/.test(limit)) return "limit must be a positive integer";
  const page = {
    start: start === null ? 0 : Number(start),
    limit: limit === null ? DEFAULT_LIMIT : Number(limit),
  };
  if (page.limit < 1) return "limit must be a positive integer";
  // Pipedrive clamps rather than rejects an oversized limit.
  page.limit = Math.min(page.limit, MAX_LIMIT);
  return page;
}

/**
 * How a v1 list says where it stands: most under `additional_data.pagination`; the leads list and a
 * deal's mail list straight in `additional_data` (their documented `AdditionalData`, in the official
 * clients' models of GET /v1/leads and GET /v1/deals/{id}/mailMessages).
 */
type PaginationPlace = "nested" | "flat";

/** The v1 list envelope over `total` items; an empty page is `data: null`, as Pipedrive sends it. */
function listPage(
  query: URLSearchParams,
  total: number,
  item: (position: number) => unknown,
  place: PaginationPlace = "nested",
): ApiResult {
  const page = parsePage(query);
  if (typeof page === "string") return badRequest(page);
  const end = Math.min(total, page.start + page.limit);
  const data: unknown[] = [];
  for (let i = page.start; i < end; i++) data.push(item(i));
  const more = end < total;
  const pagination = {
    start: page.start,
    limit: page.limit,
    more_items_in_collection: more,
    ...(more ? { next_start: page.start + page.limit } : {}),
  };
  return {
    status: 200,
    body: {
      success: true,
      data: data.length === 0 ? null : data,
      additional_data: place === "flat" ? pagination : { pagination },
    },
  };
}

/** Lead positions in /v1/leads (archived = false) or /v1/leads/archived, rebuilt when leads are added. */
const leadLists = new WeakMap<Dataset, { count: number; live: Int32Array; archived: Int32Array }>();

/**
 * A v1 list's rows as 1-based ids, what a round deleted left out (Pipedrive's lists hold no
 * deleted record): full pages still, `start` counting listed rows only. Null while nothing of the
 * kind was deleted (every position is its id).
 */
function listedIds(ds: Dataset, kind: RowKind, ids: ArrayLike<number> | null): number[] | null {
  const gone = ds.deletedByChanges(kind);
  if (kind === "deals" || gone.length === 0) return ids ? Array.from(ids) : null;
  const all = ids ? Array.from(ids) : Array.from({ length: ds.count(kind) }, (_, i) => i + 1);
  return all.filter((id) => !ds.isGone(kind, id));
}

function leadPositions(ds: Dataset, archived: boolean): Int32Array {
  let lists = leadLists.get(ds);
  if (!lists || lists.count !== ds.count("leads")) {
    const live: number[] = [];
    const gone: number[] = [];
    for (let i = 0; i < ds.count("leads"); i++) {
      // A deleted lead is in neither list.
      if (ds.isGone("leads", i + 1)) continue;
      (ds.isArchived("leads", i + 1) ? gone : live).push(i);
    }
    lists = { count: ds.count("leads"), live: Int32Array.from(live), archived: Int32Array.from(gone) };
    leadLists.set(ds, lists);
  }
  return archived ? lists.archived : lists.live;
}

function listLeads(ds: Dataset, query: URLSearchParams, archived: boolean): ApiResult {
  // Only the live list documents updated_since; /v1/leads/archived ignores it.
  if (!archived && query.has("updated_since")) {
    const ids = updatedSince(ds, "leads", query, (id) => !ds.isArchived("leads", id));
    if (typeof ids === "string") return badRequest(ids);
    return listPage(query, ids.length, (i) => ds.rowAt("leads", (ids[i] as number) - 1), "flat");
  }
  const positions = leadPositions(ds, archived);
  return listPage(query, positions.length, (i) => ds.rowAt("leads", positions[i] as number), "flat");
}

/**
 * The ids a v1 list with `updated_since` holds, in id order: "only [rows] with an update_time later
 * than or equal to this time" (GET /v1/leads and GET /v1/notes in Pipedrive's reference), deleted
 * rows left out as every v1 list leaves them out. `start` counts these rows only.
 */
function updatedSince(
  ds: Dataset,
  kind: "leads" | "notes",
  query: URLSearchParams,
  inList: (id: number) => boolean = () => true,
): number[] | string {
  const sinceMs = parseTime(query, "updated_since");
  if (typeof sinceMs === "string") return sinceMs;
  // A recent bound can only match the change set: look at those ids alone.
  const candidates =
    sinceMs !== null && sinceMs > GENERATED_UNTIL_MS
      ? [...new Set([...ds.editedIds(kind), ...ds.addedIds(kind)])].sort((a, b) => a - b)
      : Array.from({ length: ds.count(kind) }, (_, i) => i + 1);
  return candidates.filter(
    (id) => !ds.isGone(kind, id) && inList(id) && (sinceMs === null || ds.updateTimeMs(kind, id) >= sinceMs),
  );
}

function listActivities(ds: Dataset, query: URLSearchParams): ApiResult {
  const userId = query.get("user_id");
  // Pipedrive trap: without user_id=0, GET /v1/activities returns only the token owner's
  // activities, so a naive import silently misses everyone else's.
  if (userId === "0") return listKind(ds, "activities", query);
  if (userId !== null && !/^[1-9]\d{0,9}$/.test(userId)) return badRequest("user_id must be an integer");
  const ids = listedIds(
    ds,
    "activities",
    ds.activityIdsOf(userId === null ? TOKEN_OWNER_ID : Number(userId)),
  )!;
  return listPage(query, ids.length, (i) => ds.rowAt("activities", (ids[i] as number) - 1));
}

/** A kind's whole v1 list, without what was deleted. */
function listKind(ds: Dataset, kind: RowKind, query: URLSearchParams): ApiResult {
  const ids = listedIds(ds, kind, null);
  if (!ids) return listPage(query, ds.count(kind), (i) => ds.rowAt(kind, i));
  return listPage(query, ids.length, (i) => ds.rowAt(kind, (ids[i] as number) - 1));
}

const truthy = (value: string | null): boolean => value === "1" || value === "true";

function listDealMail(ds: Dataset, rawDealId: string, query: URLSearchParams): ApiResult {
  if (!ds.findRow("deals", rawDealId)) return notFound("Deal");
  const dealId = Number(rawDealId);
  // Since 2026 the per-deal list accepts include_body, saving one request per message.
  // Only where the account has it: elsewhere the list ignores the parameter and sends no body key.
  const includeBody = ds.listIncludeBody && truthy(query.get("include_body"));
  return listPage(
    query,
    ds.mail.countFor(dealId),
    (index) => {
      const data = ds.mailMessage(dealId, index, includeBody, true) as Row;
      return { object: "mailMessage", timestamp: data.message_time, data };
    },
    "flat",
  );
}

/** The mailbox service answers in its own envelope (the documented `MailServiceBaseResponse`). */
function getMailMessage(ds: Dataset, rawId: string, query: URLSearchParams): ApiResult {
  const location = /^[1-9]\d{0,9}$/.test(rawId) ? ds.mail.locate(Number(rawId)) : undefined;
  if (!location) return notFound("Mail message");
  const data = ds.mailMessage(location.dealId, location.index, truthy(query.get("include_body")));
  return {
    status: 200,
    body: { success: true, statusCode: 200, statusText: "OK", service: "mailbox-api", data },
  };
}

function organizationFields(ds: Dataset, query: URLSearchParams): ApiResult {
  const fields = [
    { id: 1, key: "name", name: "Name", field_type: "varchar", edit_flag: false },
    { id: 2, key: "owner_id", name: "Owner", field_type: "user", edit_flag: false },
    { id: 3, key: "address", name: "Address", field_type: "address", edit_flag: false },
    { id: 4, key: "add_time", name: "Organization created", field_type: "date", edit_flag: false },
    { id: 5, key: "update_time", name: "Update time", field_type: "date", edit_flag: false },
    ...ds.customFields.byKind.organizations.map((f, i) => ({
      id: 6 + i,
      key: f.key,
      name: f.name,
      field_type: f.type,
      edit_flag: true,
    })),
  ];
  return listPage(query, fields.length, (i) => fields[i]);
}

const isRowKind = (segment: string | undefined): segment is RowKind =>
  (ROW_KINDS as readonly string[]).includes(segment ?? "");

/** Resolves a /v1 path (segments after "v1") to its call type and handler. */
export function matchApiRoute(
  ds: Dataset,
  method: string,
  segments: string[],
  query: URLSearchParams,
): ApiRoute {
  const unknown: ApiRoute = { callType: null, endpoint: null, run: () => notFound("Endpoint") };
  if (method !== "GET") return unknown;
  const [first, second, third, ...rest] = segments;
  if (rest.length > 0) return unknown;
  if (isRowKind(first)) {
    const kind = first;
    if (second === undefined) {
      const endpoint = `/v1/${kind}`;
      if (kind === "activities") return { callType: "list", endpoint, run: () => listActivities(ds, query) };
      if (kind === "leads") return { callType: "list", endpoint, run: () => listLeads(ds, query, false) };
      if (kind === "notes" && query.has("updated_since"))
        return {
          callType: "list",
          endpoint,
          run: () => {
            const ids = updatedSince(ds, "notes", query);
            if (typeof ids === "string") return badRequest(ids);
            return listPage(query, ids.length, (i) => ds.rowAt("notes", (ids[i] as number) - 1));
          },
        };
      return { callType: "list", endpoint, run: () => listKind(ds, kind, query) };
    }
    if (kind === "leads" && second === "archived" && third === undefined) {
      return { callType: "list", endpoint: "/v1/leads/archived", run: () => listLeads(ds, query, true) };
    }
    if (third === undefined) {
      return {
        callType: "get",
        endpoint: `/v1/${kind}/{id}`,
        run: () => {
          const data = ds.findRow(kind, second);
          return data ? { status: 200, body: { success: true, data } } : notFound(SINGULAR[kind]);
        },
      };
    }
    if (kind === "deals" && third === "mailMessages") {
      return {
        callType: "list",
        endpoint: "/v1/deals/{id}/mailMessages",
        run: () => listDealMail(ds, second, query),
      };
    }
    return unknown;
  }
  if (first === "mailbox" && second === "mailMessages" && third !== undefined) {
    return {
      callType: "get",
      endpoint: "/v1/mailbox/mailMessages/{id}",
      run: () => getMailMessage(ds, third, query),
    };
  }
  if (first === "organizationFields" && second === undefined) {
    return { callType: "list", endpoint: "/v1/organizationFields", run: () => organizationFields(ds, query) };
  }
  return unknown;
}
