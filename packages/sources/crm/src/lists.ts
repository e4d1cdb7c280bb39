/**
 * Where each kind is listed in Pipedrive as it is since 2026. Deals, persons, organizations and
 * activities come from the v2 API (cursor pages, plain ids, `custom_fields`); leads and notes exist
 * only in v1 (start/limit pages that can be striped). A kind may have several lists: archived deals
 * and leads are not in the normal ones.
 */
export interface SourceList {
  api: "v1" | "v2";
  path: string;
  params?: Record<string, string>;
  /** Every row of this list is archived, whatever flag the row itself carries. */
  archived?: boolean;
  /**
   * The list takes `updated_since` (every v2 list; of the v1 lists, /v1/leads and /v1/notes per
   * Pipedrive's reference, not /v1/leads/archived): a catch-up asks the source for what changed
   * rather than walking the list whole.
   */
  updatedSince?: boolean;
  /** The list can say how many messages each row has (`include_fields=email_messages_count`): the deal lists. */
  mailCounts?: boolean;
}

export const KIND_LISTS: Readonly<Record<string, readonly SourceList[]>> = {
  organizations: [{ api: "v2", path: "/api/v2/organizations" }],
  persons: [{ api: "v2", path: "/api/v2/persons" }],
  deals: [
    // Without `deleted` in status, deals deleted in the last 30 days are not listed at all.
    { api: "v2", path: "/api/v2/deals", params: { status: "open,won,lost,deleted" }, mailCounts: true },
    { api: "v2", path: "/api/v2/deals/archived", archived: true, mailCounts: true },
  ],
  leads: [
    { api: "v1", path: "/v1/leads", updatedSince: true },
    { api: "v1", path: "/v1/leads/archived", archived: true },
  ],
  // v2: the v1 `user_id` default (only the token owner's activities) does not exist there.
  activities: [{ api: "v2", path: "/api/v2/activities" }],
  notes: [{ api: "v1", path: "/v1/notes", updatedSince: true }],
};

/** The last phase: applies what the customer changed or added while the run was going. */
export const CATCH_UP = "catch-up";

/** Kinds in the order their parents come first: the catch-up pass walks them in this order. */
export const PARENT_ORDER = ["organizations", "persons", "deals", "leads", "activities", "notes"] as const;

/** Where a v1 list page says where it stands. */
export interface V1Pagination {
  start?: number;
  limit?: number;
  more_items_in_collection?: boolean;
  next_start?: number;
}

export interface V1Envelope {
  success?: boolean;
  data?: unknown[] | null;
  additional_data?: (V1Pagination & { pagination?: V1Pagination | null }) | null;
}

export interface V2Envelope {
  success?: boolean;
  data?: unknown[] | null;
  additional_data?: { next_cursor?: string | null } | null;
}

/** The rows of either envelope: an empty collection may be `data: null`, with or without additional_data. */
export function items(body: V1Envelope | V2Envelope | null | undefined): unknown[] {
  return Array.isArray(body?.data) ? body.data : [];
}

/**
 * A v1 page's pagination. Most lists nest it under `additional_data.pagination`; the leads list and
 * a deal's mail list put it straight in `additional_data` (their documented `AdditionalData`), so
 * reading only the nested form would stop those lists after their first page.
 */
export function v1Pagination(body: V1Envelope | null | undefined): V1Pagination | undefined {
  const additional = body?.additional_data;
  if (typeof additional !== "object" || additional === null) return undefined;
  return additional.pagination ?? additional;
}
