import type { Tx } from "@drover/db/connection";
import { activities, companies, contacts, deals, emails, leads, productNotes } from "@drover/db/product";
import type { BatchWriter, HeldSlot, ParentMap, RowResult } from "@drover/provider-sdk";
import { and, eq, sql } from "drizzle-orm";
import { applyToHeld } from "./ownership.js";
import {
  type Activity,
  type Company,
  type Deal,
  type Email,
  isLinked,
  type Lead,
  linkedIds,
  type Note,
  type Person,
  parentRefs,
} from "./records.js";

/**
 * Destination writes, one per kind. Each runs inside the row's savepoint; the engine claims the
 * ledger slot after it, so a write whose slot is taken is rolled back and reported "already here".
 * A row the ledger already holds reaches a writer only when the pass applies it again (the catch-up),
 * with its held slot: it then changes that record as ownership allows (ownership.ts) instead of
 * creating a second one.
 */

export const NOT_LINKED = "not linked to any record";

/** How an independent row lands: the values of its record, or the reason it is skipped instead. */
interface Planned {
  values: Record<string, unknown>;
  /** Set when the row has nothing to link to: inserted as nothing, recorded as skipped. */
  skip?: string;
}

/** A row with nothing to link to, skipped, with the parent kinds it refers to that are not written. */
function notLinked(parents: ParentMap, refs: Readonly<Record<string, string | null>>): RowResult {
  const missing = Object.entries(refs)
    .filter(([kind, id]) => id !== null && id !== "" && !parents.has(kind, id))
    .map(([kind]) => kind);
  return { action: "skipped", reason: NOT_LINKED, missing };
}

/**
 * Whether, in a dry run, the row links to a parent only an earlier (rolled-back) window of the run
 * would have written: it has no record id, so the row cannot be inserted with its link (an email's
 * deal is required), yet a real run would create it. It is counted created without an insert; the
 * window is rolled back either way.
 */
function linksToStandIn(parents: ParentMap, refs: Readonly<Record<string, string | null>>): boolean {
  if (!parents.dryRun) return false;
  return Object.entries(refs).some(
    ([kind, id]) => parents.has(kind, id) && parents.get(kind, id) === undefined,
  );
}

type InsertTable = typeof companies | typeof deals | typeof leads | typeof activities | typeof productNotes;

/**
 * A kind whose rows are independent of each other within a window (no matching, no same-window
 * lookups): written one row at a time on the savepoint path, or a whole window as one multi-row
 * insert on the batched path.
 */
export interface IndependentKind<T> {
  table: InsertTable | typeof emails;
  recordType: string;
  plan(row: T, parents: ParentMap): Planned;
  /** The row's parents, by kind (records.ts parentRefs). */
  refs(row: T): Readonly<Record<string, string | null>>;
}

export const companyKind: IndependentKind<Company> = {
  table: companies,
  recordType: "company",
  refs: (row) => parentRefs("organizations", row),
  plan: (c) => ({ values: { name: c.name, address: c.address, customFields: c.customFields } }),
};

export const dealKind: IndependentKind<Deal> = {
  table: deals,
  recordType: "deal",
  refs: (row) => parentRefs("deals", row),
  plan: (d, parents) => ({
    values: {
      title: d.title,
      value: d.value === null ? null : d.value.toFixed(2),
      currency: d.currency,
      status: d.status,
      archived: d.archived,
      contactId: parents.get("persons", d.person) ?? null,
      companyId: parents.get("organizations", d.organization) ?? null,
      customFields: d.customFields,
    },
  }),
};

export const leadKind: IndependentKind<Lead> = {
  table: leads,
  recordType: "lead",
  refs: (row) => parentRefs("leads", row),
  plan: (l, parents) => ({
    values: {
      title: l.title,
      valueAmount: l.amount === null ? null : l.amount.toFixed(2),
      valueCurrency: l.currency,
      archived: l.archived,
      contactId: parents.get("persons", l.person) ?? null,
      companyId: parents.get("organizations", l.organization) ?? null,
      customFields: l.customFields,
    },
  }),
};

/** Linked to every parent the ledger knows; skipped, as a placeholder, only when it knows none. */
export const activityKind: IndependentKind<Activity> = {
  table: activities,
  recordType: "activity",
  refs: (row) => parentRefs("activities", row),
  plan: (a, parents) => {
    const links = linkedIds(parents, a);
    return {
      values: {
        subject: a.subject,
        type: a.type,
        dueDate: a.dueDate,
        done: a.done,
        customFields: a.customFields,
        ...links,
      },
      ...(isLinked(parents, a) ? {} : { skip: NOT_LINKED }),
    };
  },
};

export const noteKind: IndependentKind<Note> = {
  table: productNotes,
  recordType: "note",
  refs: (row) => parentRefs("notes", row),
  plan: (n, parents) => {
    const links = linkedIds(parents, n);
    return {
      values: { content: n.content, customFields: n.customFields, ...links },
      ...(isLinked(parents, n) ? {} : { skip: NOT_LINKED }),
    };
  },
};

export const emailKind: IndependentKind<Email> = {
  table: emails,
  recordType: "email",
  refs: (e) => ({ deals: e.deal }),
  plan: (e, parents) => {
    const dealId = parents.get("deals", e.deal);
    return {
      values: {
        dealId: dealId ?? null,
        subject: e.subject,
        snippet: e.snippet,
        fromAddress: e.from,
        toAddresses: e.to,
        body: e.body,
        sentAt: e.sentAt,
      },
      ...(parents.has("deals", e.deal) ? {} : { skip: NOT_LINKED }),
    };
  },
};

/** One row of an independent kind, inside its savepoint: updated in place, skipped, or created. */
export async function writeIndependent<T>(
  kind: IndependentKind<T>,
  tx: Tx,
  tenantId: string,
  row: T,
  parents: ParentMap,
  held?: HeldSlot,
): Promise<RowResult> {
  const planned = kind.plan(row, parents);
  if (held) return applyToHeld(tx, kind.table, tenantId, held, kind.recordType, planned.values);
  if (planned.skip) return notLinked(parents, kind.refs(row));
  if (linksToStandIn(parents, kind.refs(row)))
    return { action: "created", recordType: kind.recordType, recordId: 0 };
  const [created] = await tx
    .insert(kind.table)
    .values({ tenantId, ...planned.values } as never)
    .returning({ id: kind.table.id });
  return { action: "created", recordType: kind.recordType, recordId: created!.id };
}

/**
 * The batched path for an independent kind: a window's new rows in one multi-row INSERT, its
 * rows applied again to held records (catch-up) and skips decided row by row, all in the window's
 * transaction and without savepoints. A failure undoes the window, which the engine then writes
 * again through writeRow, one savepoint per row, so a bad row still loses only itself.
 */
export function independentBatch<T>(
  kind: IndependentKind<T>,
  tenantId: string,
  parents: ParentMap,
): BatchWriter<T> {
  return {
    writeRow: (tx, row, _sourceId, held) => writeIndependent(kind, tx, tenantId, row, parents, held),
    async writeBatch(tx, rows) {
      const results: RowResult[] = new Array(rows.length);
      const inserts: { at: number; values: Record<string, unknown> }[] = [];
      for (const [at, row] of rows.entries()) {
        if (row.held) {
          results[at] = await writeIndependent(kind, tx, tenantId, row.data, parents, row.held);
          continue;
        }
        const planned = kind.plan(row.data, parents);
        if (planned.skip) results[at] = notLinked(parents, kind.refs(row.data));
        else if (linksToStandIn(parents, kind.refs(row.data)))
          results[at] = { action: "created", recordType: kind.recordType, recordId: 0 };
        else inserts.push({ at, values: { tenantId, ...planned.values } });
      }
      if (inserts.length > 0) {
        // One INSERT ... VALUES returns its rows in the order of its VALUES list: Postgres inserts
        // them in that order and RETURNING reports each as it is inserted.
        const created = await tx
          .insert(kind.table)
          .values(inserts.map((i) => i.values) as never)
          .returning({ id: kind.table.id });
        if (created.length !== inserts.length)
          throw new Error(`inserted ${created.length} ${kind.recordType} rows for ${inserts.length}`);
        for (const [k, insert] of inserts.entries())
          results[insert.at] = { action: "created", recordType: kind.recordType, recordId: created[k]!.id };
      }
      return results;
    },
  };
}

/** In a dry run: whether an earlier window of it would have created a contact with this email. */
async function wouldBeContact(tx: Tx, parents: ParentMap, email: string): Promise<boolean> {
  if (!parents.dryRun) return false;
  const key = email.toLowerCase();
  return (await parents.dryRun.matchKeys(tx, "persons", [key])).has(key);
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
  held?: HeldSlot,
): Promise<RowResult> {
  if (held) {
    const companyId = parents.get("organizations", p.organization) ?? null;
    return applyToHeld(tx, contacts, tenantId, held, "contact", {
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
      // A contact the source deleted (a follow pass marked it) is no one to match: a new person
      // with its email is a contact of its own.
      .where(
        and(
          eq(contacts.tenantId, tenantId),
          sql`lower(${contacts.email}) = lower(${p.email})`,
          sql`${contacts.deletedAt} is null`,
        ),
      )
      .orderBy(contacts.id)
      .limit(1);
    if (existing)
      return { action: "matched", recordType: "contact", recordId: existing.id, matchRule: "email" };
    if (await wouldBeContact(tx, parents, p.email))
      return { action: "matched", recordType: "contact", recordId: 0, matchRule: "email" };
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
    ...(p.email ? { matchKey: p.email.toLowerCase() } : {}),
    // Organizations are imported in the same phase: a parent not written yet is linked at the barrier.
    ...(p.organization && companyId === null ? { pendingRefs: { organizations: p.organization } } : {}),
  };
}

/**
 * Persons on the batched path, with writePerson's rules for the whole window at once: the window
 * locks every email it carries (sorted, so two windows never wait on each other in opposite
 * orders), finds the contacts those emails already belong to in one query, inserts the persons
 * left in one multi-row insert, and matches a later person of the window sharing an email with an
 * earlier one to the contact that earlier one became, exactly as writing them one by one would.
 */
export function personBatch(tenantId: string, parents: ParentMap): BatchWriter<Person> {
  return {
    writeRow: (tx, row, _sourceId, held) => writePerson(tx, tenantId, row, parents, held),
    async writeBatch(tx, rows) {
      const results: RowResult[] = new Array(rows.length);
      const emailKey = (p: Person) => (p.email ? p.email.toLowerCase() : null);
      const fresh = rows.flatMap((row, at) => (row.held ? [] : [{ at, person: row.data }]));
      const keys = [
        ...new Set(fresh.map((f) => emailKey(f.person)).filter((k): k is string => k !== null)),
      ].sort();
      if (keys.length > 0)
        await tx.execute(sql`
          select pg_advisory_xact_lock(hashtextextended(${tenantId} || ':' || k, 0))
            from unnest(${sql.param(keys)}::text[]) with ordinality as u(k, i) order by i`);
      const known = new Map<string, number>();
      if (keys.length > 0) {
        const found = await tx.execute<{ k: string; id: string }>(sql`
          select lower(email) as k, min(id)::text as id from app.contacts
           where tenant_id = ${tenantId} and lower(email) = any(${sql.param(keys)}::text[])
             and deleted_at is null
           group by lower(email)`);
        for (const f of found) known.set(f.k, Number(f.id));
        // A dry run's earlier windows were rolled back: the contacts they would have created are
        // found by their email among its would-be rows, with no record id (nothing is written).
        if (parents.dryRun) {
          const wouldBe = await parents.dryRun.matchKeys(tx, "persons", keys);
          for (const k of wouldBe) if (!known.has(k)) known.set(k, 0);
        }
      }
      // Rows to create, and later rows of the window that share an email with one of them.
      const creating: { at: number; person: Person; companyId: number | null }[] = [];
      const firstWithEmail = new Map<string, number>();
      const sameAs: { at: number; index: number }[] = [];
      for (const { at, person } of fresh) {
        const key = emailKey(person);
        const matched = key === null ? undefined : known.get(key);
        if (matched !== undefined) {
          results[at] = { action: "matched", recordType: "contact", recordId: matched, matchRule: "email" };
          continue;
        }
        if (key !== null && firstWithEmail.has(key)) {
          sameAs.push({ at, index: firstWithEmail.get(key)! });
          continue;
        }
        if (key !== null) firstWithEmail.set(key, creating.length);
        creating.push({ at, person, companyId: parents.get("organizations", person.organization) ?? null });
      }
      if (creating.length > 0) {
        // One INSERT ... VALUES returns its rows in the order of its VALUES list.
        const created = await tx
          .insert(contacts)
          .values(
            creating.map(({ person: p, companyId }) => ({
              tenantId,
              name: p.name,
              email: p.email,
              phone: p.phone,
              companyId,
              customFields: p.customFields,
            })),
          )
          .returning({ id: contacts.id });
        if (created.length !== creating.length)
          throw new Error(`inserted ${created.length} contacts for ${creating.length}`);
        for (const [k, { at, person, companyId }] of creating.entries())
          results[at] = {
            action: "created",
            recordType: "contact",
            recordId: created[k]!.id,
            ...(person.email ? { matchKey: person.email.toLowerCase() } : {}),
            ...(person.organization && companyId === null
              ? { pendingRefs: { organizations: person.organization } }
              : {}),
          };
      }
      for (const { at, index } of sameAs) {
        const first = results[creating[index]!.at]!;
        if (first.action !== "created") throw new Error("a shared email's first person was not created");
        results[at] = {
          action: "matched",
          recordType: "contact",
          recordId: first.recordId,
          matchRule: "email",
        };
      }
      // Catch-up rows the ledger already holds are applied to their record, one by one.
      for (const [at, row] of rows.entries())
        if (row.held) results[at] = await writePerson(tx, tenantId, row.data, parents, row.held);
      return results;
    },
  };
}
