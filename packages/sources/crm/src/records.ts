import {
  type Activity,
  type Company,
  type Deal,
  type Email,
  type Lead,
  type Note,
  type ParentKinds,
  type Parents,
  type Person,
  parentRefsOf,
} from "@drover/product-records";
import { RowError } from "@drover/provider-sdk";
import { asObject, bool, customFields, day, number, primaryValue, ref, text, timestamp } from "./fields.js";

/**
 * Source rows parsed into what the destination needs. Parsing happens before any transaction, so
 * a malformed row is known as such before its window opens.
 */

export type { Activity, Company, Deal, Email, Lead, Note, Parents, Person } from "@drover/product-records";

/**
 * Fields every record carries even where the destination keeps no copy: a row whose timestamps or
 * owner are garbage is malformed as a whole, and is better failed with a reason than half-trusted.
 */
function checkCommon(r: Record<string, unknown>): void {
  timestamp(r, "add_time");
  timestamp(r, "update_time");
  ref(r, "owner_id");
  ref(r, "user_id");
}

export function parseCompany(raw: unknown): Company {
  const r = asObject(raw);
  checkCommon(r);
  return {
    name: text(r, "name", { required: true }),
    address: address(r),
    customFields: customFields(r),
  };
}

/** v1 sends the address as text; v2 as an object whose `value` is the formatted address. */
function address(r: Record<string, unknown>): string | null {
  const v = r.address;
  if (typeof v === "object" && v !== null && !Array.isArray(v))
    return text(v as Record<string, unknown>, "value");
  return text(r, "address");
}

export function parsePerson(raw: unknown): Person {
  const r = asObject(raw);
  checkCommon(r);
  return {
    name: text(r, "name", { required: true }),
    email: primaryValue(r, "email", "email") ?? primaryValue(r, "emails", "email"),
    phone: primaryValue(r, "phone", "phone") ?? primaryValue(r, "phones", "phone"),
    organization: ref(r, "org_id"),
    customFields: customFields(r),
  };
}

const CURRENCY = /^[A-Z]{3}$/;

function currency(r: Record<string, unknown>, field: string): string | null {
  const c = text(r, field);
  if (c !== null && !CURRENCY.test(c))
    throw new RowError(`${field} "${c.slice(0, 10)}" is not a currency code`);
  return c;
}

export function parseDeal(raw: unknown): Deal {
  const r = asObject(raw);
  checkCommon(r);
  return {
    title: text(r, "title", { required: true }),
    value: number(r, "value"),
    currency: currency(r, "currency"),
    // v2 flags a deleted deal with is_deleted; v1 said so in status. Either way it is kept, as deleted.
    status: r.is_deleted === true ? "deleted" : (text(r, "status") ?? "open"),
    archived: r.is_archived === true,
    person: ref(r, "person_id"),
    organization: ref(r, "org_id"),
    customFields: customFields(r),
  };
}

export function parseLead(raw: unknown): Lead {
  const r = asObject(raw);
  checkCommon(r);
  const value = r.value === null || r.value === undefined ? null : asObject(r.value, "value");
  return {
    title: text(r, "title", { required: true }),
    amount: value ? number(value, "amount") : null,
    currency: value ? currency(value, "currency") : null,
    person: ref(r, "person_id"),
    organization: ref(r, "organization_id") ?? ref(r, "org_id"),
    archived: r.is_archived === true,
    customFields: customFields(r),
  };
}

function parents(r: Record<string, unknown>): Parents {
  return {
    deal: ref(r, "deal_id"),
    person: ref(r, "person_id") ?? primaryParticipant(r),
    organization: ref(r, "org_id"),
    lead: ref(r, "lead_id"),
  };
}

/** v2 activities name their persons in `participants`; the primary one stands for person_id when that is empty. */
function primaryParticipant(r: Record<string, unknown>): string | null {
  const list = r.participants;
  if (!Array.isArray(list)) return null;
  const entries = list.filter((p): p is Record<string, unknown> => typeof p === "object" && p !== null);
  const pick = entries.find((p) => p.primary === true) ?? entries[0];
  return pick ? ref(pick, "person_id") : null;
}

export function parseActivity(raw: unknown): Activity {
  const r = asObject(raw);
  checkCommon(r);
  return {
    subject: text(r, "subject", { required: true }),
    type: text(r, "type") ?? "task",
    dueDate: day(r, "due_date"),
    done: bool(r, "done"),
    customFields: customFields(r),
    ...parents(r),
  };
}

export function parseNote(raw: unknown): Note {
  const r = asObject(raw);
  checkCommon(r);
  return { content: text(r, "content", { required: true }), customFields: customFields(r), ...parents(r) };
}

/** A mail list item is wrapped as {object, timestamp, data}; tolerate the bare message too. */
export function unwrapMail(raw: unknown): unknown {
  if (
    typeof raw === "object" &&
    raw !== null &&
    "data" in raw &&
    typeof (raw as { data: unknown }).data === "object"
  ) {
    return (raw as { data: unknown }).data;
  }
  return raw;
}

function addresses(r: Record<string, unknown>, field: string): string[] {
  const v = r[field];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new RowError(`${field} is not a list`);
  return v
    .map((p) => (typeof p === "object" && p !== null ? (p as Record<string, unknown>).email_address : p))
    .filter((a): a is string => typeof a === "string" && a !== "");
}

export function parseEmail(raw: unknown, deal: string, body: string | null): Email {
  const r = asObject(raw, "mail message");
  return {
    deal,
    subject: text(r, "subject") ?? "(no subject)",
    snippet: text(r, "snippet"),
    from: addresses(r, "from")[0] ?? null,
    to: addresses(r, "to"),
    sentAt: timestamp(r, "message_time"),
    body,
  };
}

/**
 * Pipedrive's kind names for the product's parent records (the writers resolve parents under
 * them): an organization is the product's company, a person its contact.
 */
export const PIPEDRIVE_PARENTS: ParentKinds = {
  company: "organizations",
  contact: "persons",
  deal: "deals",
  lead: "leads",
};

/** Pipedrive's kinds as the product's record types, whose parents the writers resolve. */
const RECORD_TYPES = {
  persons: "contact",
  deals: "deal",
  leads: "lead",
  activities: "activity",
  notes: "note",
} as const;

/** Which parent kinds a row of `kind` refers to, for one ledger query per page. */
export function parentRefs(kind: string, row: unknown): Record<string, string | null> {
  const recordType = RECORD_TYPES[kind as keyof typeof RECORD_TYPES];
  return recordType ? parentRefsOf(PIPEDRIVE_PARENTS, recordType, row) : {};
}

/**
 * Whether the catch-up pass counts a listed row as changed since `since` (a whole second, passCut
 * in partitions.ts): its update_time is at or after it, as the source's own updated_since filter
 * keeps a row. A row whose update_time is unreadable counts as changed: parsing
 * fails it with a reason, or it is applied again rather than missed.
 */
export function changedSince(raw: unknown, since: string): boolean {
  const v =
    typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>).update_time : undefined;
  if (typeof v !== "string") return true;
  const t = Date.parse(/[TZ+]/.test(v.slice(10)) ? v : `${v.replace(" ", "T")}Z`);
  return Number.isNaN(t) || t >= Date.parse(since);
}
