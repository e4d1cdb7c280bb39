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

export async function writeCompany(tx: Tx, tenantId: string, c: Company): Promise<RowResult> {
  const [row] = await tx
    .insert(companies)
    .values({ tenantId, name: c.name, address: c.address, customFields: c.customFields })
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
): Promise<RowResult> {
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

export async function writeDeal(tx: Tx, tenantId: string, d: Deal, parents: ParentMap): Promise<RowResult> {
  const [row] = await tx
    .insert(deals)
    .values({
      tenantId,
      title: d.title,
      value: d.value === null ? null : d.value.toFixed(2),
      currency: d.currency,
      status: d.status,
      contactId: parents.get("persons", d.person) ?? null,
      companyId: parents.get("organizations", d.organization) ?? null,
      customFields: d.customFields,
    })
    .returning({ id: deals.id });
  return { action: "created", recordType: "deal", recordId: row!.id };
}

export async function writeLead(tx: Tx, tenantId: string, l: Lead, parents: ParentMap): Promise<RowResult> {
  const [row] = await tx
    .insert(leads)
    .values({
      tenantId,
      title: l.title,
      valueAmount: l.amount === null ? null : l.amount.toFixed(2),
      valueCurrency: l.currency,
      contactId: parents.get("persons", l.person) ?? null,
      companyId: parents.get("organizations", l.organization) ?? null,
    })
    .returning({ id: leads.id });
  return { action: "created", recordType: "lead", recordId: row!.id };
}

/** Linked to every parent the ledger knows; skipped, as a placeholder, only when it knows none. */
export async function writeActivity(
  tx: Tx,
  tenantId: string,
  a: Activity,
  parents: ParentMap,
): Promise<RowResult> {
  const links = linkedIds(parents, a);
  if (!Object.values(links).some((v) => v !== null)) return { action: "skipped", reason: NOT_LINKED };
  const [row] = await tx
    .insert(activities)
    .values({ tenantId, subject: a.subject, type: a.type, dueDate: a.dueDate, done: a.done, ...links })
    .returning({ id: activities.id });
  return { action: "created", recordType: "activity", recordId: row!.id };
}

export async function writeNote(tx: Tx, tenantId: string, n: Note, parents: ParentMap): Promise<RowResult> {
  const links = linkedIds(parents, n);
  if (!Object.values(links).some((v) => v !== null)) return { action: "skipped", reason: NOT_LINKED };
  const [row] = await tx
    .insert(productNotes)
    .values({ tenantId, content: n.content, ...links })
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
