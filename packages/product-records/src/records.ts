import type { ParentMap } from "@drover/provider-sdk";

/**
 * The product's records as a source's rows are parsed into them, whatever the source: what the
 * writers (writers.ts) put into the product tables. A source parses its own shapes into these before
 * any transaction, so a malformed row is known as such before its window opens. Parents are named by
 * the source's ids; the writers find their local ids through the ParentMap, under the source's own
 * kind names (ParentKinds).
 */

/**
 * Set when the source deleted the record (HubSpot's archived, a follow pass's sweep): its
 * `deleted_at`. Absent where the source says nothing of it, so a pass that applies the row again
 * leaves a mark another pass made.
 */
interface Deletable {
  deletedAt?: Date | null;
}

export interface Company extends Deletable {
  name: string;
  address: string | null;
  customFields: Record<string, unknown> | null;
}

export interface Person extends Deletable {
  name: string;
  email: string | null;
  phone: string | null;
  organization: string | null;
  customFields: Record<string, unknown> | null;
}

export interface Deal extends Deletable {
  title: string;
  value: number | null;
  currency: string | null;
  /** open, won, lost; "deleted" for a deal the source deleted (listed only when asked for). */
  status: string;
  archived: boolean;
  person: string | null;
  organization: string | null;
  customFields: Record<string, unknown> | null;
}

export interface Lead extends Deletable {
  title: string;
  amount: number | null;
  currency: string | null;
  person: string | null;
  organization: string | null;
  archived: boolean;
  customFields: Record<string, unknown> | null;
}

/** Activities and notes may point at a deal, a person, an organization and a lead at once. */
export interface Parents {
  deal: string | null;
  person: string | null;
  organization: string | null;
  lead: string | null;
}

export interface Activity extends Parents, Deletable {
  subject: string;
  type: string;
  dueDate: string | null;
  done: boolean;
  customFields: Record<string, unknown> | null;
}

export interface Note extends Parents, Deletable {
  content: string;
  customFields: Record<string, unknown> | null;
}

export interface Email extends Deletable {
  deal: string;
  subject: string;
  snippet: string | null;
  from: string | null;
  to: string[];
  sentAt: Date | null;
  body: string | null;
  customFields?: Record<string, unknown> | null;
}

/**
 * The source's kind names for the product's parent records, the keys its rows' parents are
 * resolved under (ctx.resolveParents): Pipedrive's organizations and persons, HubSpot's companies
 * and contacts. A source without leads names a kind it never runs: nothing is ever found under it.
 */
export interface ParentKinds {
  company: string;
  contact: string;
  deal: string;
  lead: string;
}

/** Which parent kinds a row of the record type refers to, for one ledger query per page. */
export function parentRefsOf(
  kinds: ParentKinds,
  recordType: "company" | "contact" | "deal" | "lead" | "activity" | "note" | "email",
  row: unknown,
): Record<string, string | null> {
  const p = row as Partial<Parents>;
  switch (recordType) {
    case "contact":
      return { [kinds.company]: p.organization ?? null };
    case "deal":
    case "lead":
      return { [kinds.contact]: p.person ?? null, [kinds.company]: p.organization ?? null };
    case "activity":
    case "note":
      return {
        [kinds.deal]: p.deal ?? null,
        [kinds.contact]: p.person ?? null,
        [kinds.company]: p.organization ?? null,
        [kinds.lead]: p.lead ?? null,
      };
    case "email":
      return { [kinds.deal]: (row as Partial<Email>).deal ?? null };
    default:
      return {};
  }
}

/** Whether the row links to any parent the run has (or, in a dry run, would have) written. */
export function isLinked(kinds: ParentKinds, parentsMap: ParentMap, p: Parents): boolean {
  return (
    parentsMap.has(kinds.deal, p.deal) ||
    parentsMap.has(kinds.contact, p.person) ||
    parentsMap.has(kinds.company, p.organization) ||
    parentsMap.has(kinds.lead, p.lead)
  );
}

export function linkedIds(kinds: ParentKinds, parentsMap: ParentMap, p: Parents) {
  return {
    dealId: parentsMap.get(kinds.deal, p.deal) ?? null,
    contactId: parentsMap.get(kinds.contact, p.person) ?? null,
    companyId: parentsMap.get(kinds.company, p.organization) ?? null,
    leadId: parentsMap.get(kinds.lead, p.lead) ?? null,
  };
}

/** The row's deletion mark as a column value, only when the source said something of it. */
export function deletion(row: Deletable): { deletedAt?: Date | null } {
  return row.deletedAt === undefined ? {} : { deletedAt: row.deletedAt };
}
