import { activities, companies, contacts, deals, emails, leads, productNotes, type Tx } from "@drover/db";
import type { ParentMap, RowResult } from "@drover/provider-sdk";
import { and, eq, sql } from "drizzle-orm";
import {
  type Activity,
  type Company,
  type Deal,
  type Email,
  type Lead,
  linkedIds,
  type Note,
  type Person,
} from "./records.js";

/**
 * Destination writes, one per kind. Each runs inside the row's savepoint; the engine claims the
 * ledger slot after it, so a write whose slot is taken is rolled back and reported "already here".
 */

export const NOT_LINKED = "not linked to any record";

/**
 * The record the ledger already points to for this source row, when the row is being applied again
 * (the catch-up pass): the writer then updates it in place instead of creating a second one.
 */
export type Existing = number | undefined;

async function updated(
  tx: Tx,
  table:
    | typeof companies
    | typeof contacts
    | typeof deals
    | typeof leads
    | typeof activities
    | typeof productNotes,
  tenantId: string,
  recordId: number,
  recordType: string,
  values: Record<string, unknown>,
): Promise<RowResult> {
  await tx
    .update(table)
    .set({ ...values, updatedAt: new Date() })
    .where(and(eq(table.id, recordId), eq(table.tenantId, tenantId)));
  return { action: "updated", recordType, recordId };
}

export async function writeCompany(
  tx: Tx,
  tenantId: string,
  c: Company,
  _parents?: ParentMap,
  existing?: Existing,
): Promise<RowResult> {
  const values = { name: c.name, address: c.address, customFields: c.customFields };
  if (existing !== undefined) return updated(tx, companies, tenantId, existing, "company", values);
  const [row] = await tx
    .insert(companies)
    .values({ tenantId, ...values })
    .returning({ id: companies.id });
  return { action: "created", recordType: "company", recordId: row!.id };
}

/**
 * A person whose email already belongs to a contact of the tenant is matched to it, not created:
 * the customer's product may already know them.
 */
export async function writePerson(
  tx: Tx,
  tenantId: string,
  p: Person,
  parents: ParentMap,
  existing?: Existing,
): Promise<RowResult> {
  if (existing !== undefined) {
    const companyId = parents.get("organizations", p.organization) ?? null;
    return updated(tx, contacts, tenantId, existing, "contact", {
      name: p.name,
      email: p.email,
      phone: p.phone,
      companyId,
      customFields: p.customFields,
    });
  }
  if (p.email) {
    // Two persons sharing an email, written at once by two tasks, would each find no contact and
    // each create one. A transaction lock on (tenant, email) makes the second wait for the first's
    // window to commit, then match its contact. Lock order across windows is arbitrary, so a rare
    // deadlock is possible; Postgres breaks it and the window retries as transient.
    await tx.execute(
      sql`select pg_advisory_xact_lock(hashtextextended(${tenantId} || ':' || lower(${p.email}), 0))`,
    );
    const [existing] = await tx
      .select({ id: contacts.id })
      .from(contacts)
      .where(and(eq(contacts.tenantId, tenantId), sql`lower(${contacts.email}) = lower(${p.email})`))
      .limit(1);
    if (existing) return { action: "matched", recordType: "contact", recordId: existing.id };
  }
  const companyId = parents.get("organizations", p.organization) ?? null;
  const [row] = await tx
    .insert(contacts)
    .values({
      tenantId,
      name: p.name,
      email: p.email,
      phone: p.phone,
      companyId,
      customFields: p.customFields,
    })
    .returning({ id: contacts.id });
  return {
    action: "created",
    recordType: "contact",
    recordId: row!.id,
    // Organizations are imported in the same phase: a parent not written yet is linked at the barrier.
    ...(p.organization && companyId === null ? { pendingRefs: { organizations: p.organization } } : {}),
  };
}

export async function writeDeal(
  tx: Tx,
  tenantId: string,
  d: Deal,
  parents: ParentMap,
  existing?: Existing,
): Promise<RowResult> {
  const values = {
    title: d.title,
    value: d.value === null ? null : d.value.toFixed(2),
    currency: d.currency,
    status: d.status,
    archived: d.archived,
    contactId: parents.get("persons", d.person) ?? null,
    companyId: parents.get("organizations", d.organization) ?? null,
    customFields: d.customFields,
  };
  if (existing !== undefined) return updated(tx, deals, tenantId, existing, "deal", values);
  const [row] = await tx
    .insert(deals)
    .values({ tenantId, ...values })
    .returning({ id: deals.id });
  return { action: "created", recordType: "deal", recordId: row!.id };
}

export async function writeLead(
  tx: Tx,
  tenantId: string,
  l: Lead,
  parents: ParentMap,
  existing?: Existing,
): Promise<RowResult> {
  const values = {
    title: l.title,
    valueAmount: l.amount === null ? null : l.amount.toFixed(2),
    valueCurrency: l.currency,
    archived: l.archived,
    contactId: parents.get("persons", l.person) ?? null,
    companyId: parents.get("organizations", l.organization) ?? null,
    customFields: l.customFields,
  };
  if (existing !== undefined) return updated(tx, leads, tenantId, existing, "lead", values);
  const [row] = await tx
    .insert(leads)
    .values({ tenantId, ...values })
    .returning({ id: leads.id });
  return { action: "created", recordType: "lead", recordId: row!.id };
}

/** Linked to every parent the ledger knows; skipped, as a placeholder, only when it knows none. */
export async function writeActivity(
  tx: Tx,
  tenantId: string,
  a: Activity,
  parents: ParentMap,
  existing?: Existing,
): Promise<RowResult> {
  const links = linkedIds(parents, a);
  const values = {
    subject: a.subject,
    type: a.type,
    dueDate: a.dueDate,
    done: a.done,
    customFields: a.customFields,
    ...links,
  };
  if (existing !== undefined) return updated(tx, activities, tenantId, existing, "activity", values);
  if (!Object.values(links).some((v) => v !== null)) return { action: "skipped", reason: NOT_LINKED };
  const [row] = await tx
    .insert(activities)
    .values({ tenantId, ...values })
    .returning({ id: activities.id });
  return { action: "created", recordType: "activity", recordId: row!.id };
}

export async function writeNote(
  tx: Tx,
  tenantId: string,
  n: Note,
  parents: ParentMap,
  existing?: Existing,
): Promise<RowResult> {
  const links = linkedIds(parents, n);
  const values = { content: n.content, customFields: n.customFields, ...links };
  if (existing !== undefined) return updated(tx, productNotes, tenantId, existing, "note", values);
  if (!Object.values(links).some((v) => v !== null)) return { action: "skipped", reason: NOT_LINKED };
  const [row] = await tx
    .insert(productNotes)
    .values({ tenantId, ...values })
    .returning({ id: productNotes.id });
  return { action: "created", recordType: "note", recordId: row!.id };
}

export async function writeEmail(tx: Tx, tenantId: string, e: Email, parents: ParentMap): Promise<RowResult> {
  const dealId = parents.get("deals", e.deal);
  if (dealId === undefined) return { action: "skipped", reason: NOT_LINKED };
  const [row] = await tx
    .insert(emails)
    .values({
      tenantId,
      dealId,
      subject: e.subject,
      snippet: e.snippet,
      fromAddress: e.from,
      toAddresses: e.to,
      body: e.body,
      sentAt: e.sentAt,
    })
    .returning({ id: emails.id });
  return { action: "created", recordType: "email", recordId: row!.id };
}
