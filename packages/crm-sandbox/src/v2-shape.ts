import { V2_ADDRESS_KEYS } from "./custom-fields.js";
import type { Dataset, Row } from "./dataset.js";

type V2Kind = "organizations" | "persons" | "deals" | "activities";

/**
 * Every key a v2 item carries, in the order of the documented models (pipedrive/client-php
 * `docs/versions/v2/Model/OrganizationItem.md`, `PersonItem.md`, `DealItem.md`, `ActivityItem.md`).
 * Left out on purpose: what only `include_fields` adds (a deal's `source_lead_id`) and what only an
 * account with contact sync sends (a person's `notes`, `im`, `birthday`, `job_title`). v2 activities
 * have no custom fields.
 */
export const V2_KEYS: Record<V2Kind, readonly string[]> = {
  organizations: [
    "id",
    "name",
    "owner_id",
    "add_time",
    "update_time",
    "is_deleted",
    "visible_to",
    "address",
    "label_ids",
    "website",
    "linkedin",
    "industry",
    "annual_revenue",
    "employee_count",
    "custom_fields",
  ],
  persons: [
    "id",
    "name",
    "first_name",
    "last_name",
    "owner_id",
    "org_id",
    "add_time",
    "update_time",
    "emails",
    "phones",
    "is_deleted",
    "visible_to",
    "label_ids",
    "picture_id",
    "postal_address",
    "custom_fields",
  ],
  deals: [
    "id",
    "title",
    "owner_id",
    "person_id",
    "org_id",
    "pipeline_id",
    "stage_id",
    "value",
    "currency",
    "add_time",
    "update_time",
    "stage_change_time",
    "is_deleted",
    "is_archived",
    "status",
    "probability",
    "lost_reason",
    "visible_to",
    "close_time",
    "won_time",
    "lost_time",
    "expected_close_date",
    "label_ids",
    "origin",
    "origin_id",
    "channel",
    "channel_id",
    "arr",
    "mrr",
    "acv",
    "custom_fields",
  ],
  activities: [
    "id",
    "subject",
    "type",
    "owner_id",
    "creator_user_id",
    "is_deleted",
    "add_time",
    "update_time",
    "deal_id",
    "lead_id",
    "person_id",
    "org_id",
    "project_id",
    "due_date",
    "due_time",
    "duration",
    "busy",
    "done",
    "marked_as_done_time",
    "location",
    "participants",
    "attendees",
    "conference_meeting_client",
    "conference_meeting_url",
    "conference_meeting_id",
    "public_description",
    "priority",
    "note",
  ],
};

/**
 * A row as the v2 API shows it, derived from the v1 row so both versions always agree: exactly the
 * documented keys (null where the sandbox has no value), plain integer ids (v1 lists expand them
 * into objects carrying `value`), RFC 3339 times, `emails` / `phones` arrays that are simply empty
 * when there is none, custom fields gathered under `custom_fields` (a monetary field as
 * `{value, currency}`, an address as an object), `is_deleted` / `is_archived` flags. Malformed values
 * pass through untouched; a key a malformed row lacks stays out.
 */
export function toV2(ds: Dataset, kind: V2Kind, v1: Row): Row {
  const derived: Row = {
    owner_id: plainId(v1.owner_id),
    add_time: rfc3339(v1.add_time),
    update_time: rfc3339(v1.update_time),
    is_deleted: false,
    visible_to: 3,
    label_ids: [],
  };
  if (kind !== "deals" && kind !== "activities" && typeof v1.id === "number")
    derived.is_deleted = ds.isGone(kind, v1.id);
  if (kind === "organizations") {
    derived.address = typeof v1.address === "string" ? address(v1) : v1.address;
    derived.custom_fields = ds.customFields.v2Object(kind, v1);
  } else if (kind === "persons") {
    derived.org_id = plainId(v1.org_id);
    derived.emails = contactList(v1.email);
    derived.phones = contactList(v1.phone);
    derived.custom_fields = ds.customFields.v2Object(kind, v1);
  } else if (kind === "deals") {
    derived.person_id = plainId(v1.person_id);
    derived.org_id = plainId(v1.org_id);
    derived.pipeline_id = 1;
    derived.stage_id = v1.status === "open" ? 1 + ((v1.id as number) % 5) : 5;
    derived.origin = "ManuallyCreated";
    const closed = v1.status === "won" || v1.status === "lost" ? derived.update_time : null;
    derived.close_time = closed;
    derived.won_time = v1.status === "won" ? closed : null;
    derived.lost_time = v1.status === "lost" ? closed : null;
    if (typeof v1.id === "number") {
      derived.is_deleted = ds.isDeletedDeal(v1.id);
      derived.is_archived = ds.isArchived("deals", v1.id);
    }
    derived.custom_fields = ds.customFields.v2Object(kind, v1);
  } else {
    if (typeof v1.id === "number") derived.is_deleted = ds.isGone(kind, v1.id);
    derived.owner_id = v1.user_id;
    derived.creator_user_id = v1.user_id;
    derived.busy = false;
    derived.marked_as_done_time = v1.done === true ? derived.update_time : null;
    derived.participants =
      typeof v1.person_id === "number" ? [{ person_id: v1.person_id, primary: true }] : [];
    derived.attendees = [];
  }
  const row: Row = {};
  for (const key of V2_KEYS[kind]) {
    if (key in derived) row[key] = derived[key];
    else if (key in v1) row[key] = v1[key];
    else if (!MALFORMABLE.has(key)) row[key] = null;
  }
  return row;
}

/** Keys a malformed row may lack on purpose (malform.ts deletes them): absent, not null. */
const MALFORMABLE = new Set(["name", "title"]);

/** The organization's address object, from v1's `address` and its `address_*` companions. */
function address(v1: Row): Row {
  const out: Row = {};
  for (const part of V2_ADDRESS_KEYS)
    out[part] = part === "value" ? v1.address : (v1[`address_${part}`] ?? null);
  return out;
}

function plainId(v: unknown): unknown {
  if (typeof v === "object" && v !== null && !Array.isArray(v) && "value" in v) return (v as Row).value;
  return v;
}

function rfc3339(v: unknown): unknown {
  return typeof v === "string" && /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/.test(v)
    ? `${v.replace(" ", "T")}Z`
    : v;
}

/** v1's "none" is one empty primary entry; v2's is an empty list. */
function contactList(v: unknown): unknown {
  if (!Array.isArray(v)) return v;
  return v.filter((e) => !(typeof e === "object" && e !== null && (e as Row).value === ""));
}
