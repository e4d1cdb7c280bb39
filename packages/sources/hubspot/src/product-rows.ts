import type {
  Activity,
  Company,
  Deal,
  Email,
  Note,
  ParentKinds,
  Parents,
  Person,
} from "@drover/product-records";
import { RowError } from "@drover/provider-sdk";
import type { Association } from "./associations.js";
import type { ObjectType } from "./object-types.js";
import { customFieldsOf, type HubSpotRecord } from "./records.js";

/**
 * HubSpot records as the product's records (@drover/product-records), one function per type. The
 * mapping is the README's table; parsing happens before any transaction, so a record that cannot be
 * a product row fails alone with a reason (RowError) before its window opens.
 */

/**
 * HubSpot's kind names for the product's parent records: the writers resolve a row's parents under
 * them. HubSpot's leads are not imported: nothing is ever found under that kind.
 */
export const HUBSPOT_PARENTS: ParentKinds = {
  company: "companies",
  contact: "contacts",
  deal: "deals",
  lead: "leads",
};

/** A record's parents of each type, by the HubSpot ids its associations name (null: none). */
export interface RecordLinks {
  company: string | null;
  contact: string | null;
  deal: string | null;
}

export const NO_LINKS: RecordLinks = { company: null, contact: null, deal: null };

/**
 * The one parent the product keeps of a record's associations to one type (a product row has one
 * company_id): the "Primary" one where HubSpot marks it, else the lowest id, so every pass picks
 * the same.
 */
export function keptParent(links: readonly Association[] | undefined): string | null {
  if (!links || links.length === 0) return null;
  const primary = links.find((l) => l.primary);
  if (primary) return primary.toId;
  return [...links].sort((a, b) => a.toId.length - b.toId.length || (a.toId < b.toId ? -1 : 1))[0]!.toId;
}

/** An email is the product's email when its deal is known, else an activity of type email. */
export interface EmailRow {
  email: Email;
  activity: Activity;
}

export type ProductRow = Company | Person | Deal | Note | Activity | EmailRow;

/** What every row of a type shares: its custom fields and its deletion mark. */
interface Common {
  customFields: Record<string, unknown> | null;
  deletedAt: Date | null;
}

function common(record: HubSpotRecord, custom: ReadonlySet<string>): Common {
  const fields = customFieldsOf(record, custom);
  return {
    customFields: Object.keys(fields).length > 0 ? fields : null,
    deletedAt: record.archived ? date(record.archivedAt ?? record.updatedAt, "archivedAt") : null,
  };
}

/** A HubSpot value as text: null when empty. */
function prop(record: HubSpotRecord, name: string): string | null {
  const v = record.properties[name];
  return v === undefined || v === null || v.trim() === "" ? null : v;
}

function date(value: string, what: string): Date {
  const t = Date.parse(value);
  if (Number.isNaN(t)) throw new RowError(`${what} "${value.slice(0, 40)}" is not a date`);
  return new Date(t);
}

function optionalDate(record: HubSpotRecord, name: string): Date | null {
  const v = prop(record, name);
  return v === null ? null : date(v, name);
}

/** The calendar day (UTC) of a timestamp property, as the product's date columns keep it. */
function day(record: HubSpotRecord, name: string): string | null {
  return optionalDate(record, name)?.toISOString().slice(0, 10) ?? null;
}

function amount(record: HubSpotRecord, name: string): number | null {
  const v = prop(record, name);
  if (v === null) return null;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new RowError(`${name} "${v.slice(0, 20)}" is not a number`);
  return n;
}

const CURRENCY = /^[A-Z]{3}$/;

function currency(record: HubSpotRecord, name: string): string | null {
  const c = prop(record, name);
  if (c !== null && !CURRENCY.test(c))
    throw new RowError(`${name} "${c.slice(0, 10)}" is not a currency code`);
  return c;
}

export function companyRow(record: HubSpotRecord, custom: ReadonlySet<string>): Company {
  const address = ["address", "city", "zip", "country"]
    .map((name) => prop(record, name))
    .filter((part): part is string => part !== null)
    .join(", ");
  return {
    name: prop(record, "name") ?? prop(record, "domain") ?? `HubSpot company ${record.id}`,
    address: address === "" ? null : address,
    ...common(record, custom),
  };
}

export function contactRow(record: HubSpotRecord, links: RecordLinks, custom: ReadonlySet<string>): Person {
  const name = [prop(record, "firstname"), prop(record, "lastname")].filter((p) => p !== null).join(" ");
  const email = prop(record, "email");
  return {
    name: name || email || `HubSpot contact ${record.id}`,
    email,
    phone: prop(record, "phone") ?? prop(record, "mobilephone"),
    organization: links.company,
    ...common(record, custom),
  };
}

/**
 * A deal's status. HubSpot says it in the pipeline stage: its calculated `hs_is_closed_won` /
 * `hs_is_closed` where the account sends them, else the default pipeline's closed stages. An
 * archived deal (HubSpot's recycle bin) is "deleted", as a deal Pipedrive deleted: the lead's call
 * (issue 35), one line here if archived=true is wanted instead.
 */
function dealStatus(record: HubSpotRecord): string {
  if (record.archived) return "deleted";
  const wonFlag = prop(record, "hs_is_closed_won");
  const closedFlag = prop(record, "hs_is_closed");
  if (wonFlag === "true") return "won";
  if (closedFlag === "true") return "lost";
  const stage = prop(record, "dealstage");
  if (stage === "closedwon") return "won";
  if (stage === "closedlost") return "lost";
  return "open";
}

export function dealRow(record: HubSpotRecord, links: RecordLinks, custom: ReadonlySet<string>): Deal {
  const { customFields } = common(record, custom);
  return {
    title: prop(record, "dealname") ?? `HubSpot deal ${record.id}`,
    value: amount(record, "amount"),
    currency: currency(record, "deal_currency_code"),
    status: dealStatus(record),
    archived: false,
    person: links.contact,
    organization: links.company,
    customFields,
  };
}

function parents(links: RecordLinks): Parents {
  return { deal: links.deal, person: links.contact, organization: links.company, lead: null };
}

export function noteRow(record: HubSpotRecord, links: RecordLinks, custom: ReadonlySet<string>): Note {
  return { content: prop(record, "hs_note_body") ?? "", ...parents(links), ...common(record, custom) };
}

/** The activity types of the engagements kept as activities, with their subject and due date. */
const ACTIVITY_SHAPES = {
  calls: { type: "call", subject: "hs_call_title", due: "hs_timestamp" },
  tasks: { type: "task", subject: "hs_task_subject", due: "hs_timestamp" },
  meetings: { type: "meeting", subject: "hs_meeting_title", due: "hs_meeting_start_time" },
} as const;

export function activityRow(
  type: keyof typeof ACTIVITY_SHAPES,
  record: HubSpotRecord,
  links: RecordLinks,
  custom: ReadonlySet<string>,
  now: number,
): Activity {
  const shape = ACTIVITY_SHAPES[type];
  const due = day(record, shape.due) ?? day(record, "hs_timestamp");
  // A task is done when HubSpot says COMPLETED; a call is logged once made; a meeting is done once
  // it has started (as of the read: a later pass may say so when the time comes).
  const done =
    type === "tasks"
      ? prop(record, "hs_task_status") === "COMPLETED"
      : type === "calls"
        ? true
        : (optionalDate(record, shape.due)?.getTime() ?? Number.POSITIVE_INFINITY) <= now;
  return {
    subject: prop(record, shape.subject) ?? "(no subject)",
    type: shape.type,
    dueDate: due,
    done,
    ...parents(links),
    ...common(record, custom),
  };
}

/** The addresses of `hs_email_headers` (a JSON text: {from: {email}, to: [{email}]}); none if unreadable. */
function headers(record: HubSpotRecord): { from: string | null; to: string[] } {
  const raw = prop(record, "hs_email_headers");
  if (raw === null) return { from: null, to: [] };
  try {
    const h = JSON.parse(raw) as { from?: { email?: unknown }; to?: { email?: unknown }[] };
    const from = typeof h?.from?.email === "string" ? h.from.email : null;
    const to = Array.isArray(h?.to)
      ? h.to.map((t) => t?.email).filter((e): e is string => typeof e === "string" && e !== "")
      : [];
    return { from, to };
  } catch {
    return { from: null, to: [] };
  }
}

export function emailRow(record: HubSpotRecord, links: RecordLinks, custom: ReadonlySet<string>): EmailRow {
  const subject = prop(record, "hs_email_subject") ?? "(no subject)";
  const sentAt = optionalDate(record, "hs_timestamp");
  const shared = common(record, custom);
  const { from, to } = headers(record);
  return {
    email: {
      deal: links.deal ?? "",
      subject,
      snippet: null,
      from,
      to,
      sentAt,
      body: prop(record, "hs_email_text") ?? prop(record, "hs_email_html"),
      ...shared,
    },
    activity: {
      subject,
      type: "email",
      dueDate: sentAt?.toISOString().slice(0, 10) ?? null,
      done: true,
      ...parents(links),
      ...shared,
    },
  };
}

/** A record of `type` as its product row. */
export function productRow(
  type: ObjectType,
  record: HubSpotRecord,
  links: RecordLinks,
  custom: ReadonlySet<string>,
  now: number,
): ProductRow {
  switch (type) {
    case "companies":
      return companyRow(record, custom);
    case "contacts":
      return contactRow(record, links, custom);
    case "deals":
      return dealRow(record, links, custom);
    case "notes":
      return noteRow(record, links, custom);
    case "emails":
      return emailRow(record, links, custom);
    case "calls":
    case "tasks":
    case "meetings":
      return activityRow(type, record, links, custom, now);
  }
}
