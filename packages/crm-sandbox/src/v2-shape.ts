import type { Dataset, Row, RowKind } from "./dataset.js";

/**
 * A row as the v2 API shows it, derived from the v1 row so both versions always agree: plain
 * integer ids (v1 lists expand them into objects carrying `value`), RFC 3339 times, `emails` /
 * `phones` arrays that are simply empty when there is none, custom fields gathered under
 * `custom_fields`, `is_deleted` / `is_archived` flags. Malformed values pass through untouched.
 */
export function toV2(ds: Dataset, kind: RowKind, v1: Row): Row {
  const row: Row = {};
  const custom: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(v1)) {
    if (/^[0-9a-f]{40}$/.test(key)) custom[key] = value;
    else row[key] = value;
  }
  for (const key of ["org_id", "person_id", "owner_id", "deal_id"]) row[key] = plainId(row[key]);
  for (const key of ["add_time", "update_time"]) row[key] = rfc3339(row[key]);
  if (kind === "persons") {
    row.emails = contactList(v1.email);
    row.phones = contactList(v1.phone);
    delete row.email;
    delete row.phone;
  }
  if (kind === "organizations" && typeof row.address === "string")
    row.address = { value: row.address, country: null, locality: null, route: null, postal_code: null };
  if (kind === "activities") {
    row.owner_id = row.user_id;
    delete row.user_id;
    row.participants = typeof row.person_id === "number" ? [{ person_id: row.person_id, primary: true }] : [];
  }
  if (kind === "deals" && typeof v1.id === "number") {
    row.is_deleted = ds.isDeletedDeal(v1.id);
    row.is_archived = ds.isArchived("deals", v1.id);
  } else {
    row.is_deleted = false;
  }
  row.custom_fields = custom;
  return row;
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
