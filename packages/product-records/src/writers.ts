import type { Tx } from "@drover/db/connection";
import { activities, companies, contacts, deals, emails, leads, productNotes } from "@drover/db/product";
import type { BatchWriter, HeldSlot, ParentMap, RowResult } from "@drover/provider-sdk";
import { and, eq, sql } from "drizzle-orm";
import { applyToHeld } from "./ownership.js";
import {
  type Activity,
  type Company,
  type Deal,
  deletion,
  type Email,
  isLinked,
  type Lead,
  linkedIds,
  type Note,
  type ParentKinds,
  type Person,
  parentRefsOf,
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
  /** The row's parents, by the source's kind names (parentRefsOf). */
  refs(row: T): Readonly<Record<string, string | null>>;
  /**
   * Parent kinds imported in the same phase as this one (the provider's deferredLinks): a parent
   * not written yet when the row is is linked at the barrier, through the ledger's pending refs.
   */
  deferred?: readonly string[];
}

/** The same-phase parents a created row names that are not written yet: linked at the barrier. */
function pendingRefs<T>(
  kind: IndependentKind<T>,
  row: T,
  parents: ParentMap,
): Record<string, string> | undefined {
  if (!kind.deferred || kind.deferred.length === 0) return undefined;
  const pending = Object.entries(kind.refs(row)).filter(
    (entry): entry is [string, string] =>
      kind.deferred!.includes(entry[0]) &&
      entry[1] !== null &&
      entry[1] !== "" &&
      parents.get(entry[0], entry[1]) === undefined,
  );
  return pending.length > 0 ? Object.fromEntries(pending) : undefined;
}

function created<T>(kind: IndependentKind<T>, row: T, parents: ParentMap, recordId: number): RowResult {
  const pending = pendingRefs(kind, row, parents);
  return {
    action: "created",
    recordType: kind.recordType,
    recordId,
    ...(pending ? { pendingRefs: pending } : {}),
  };
}

/** The product's writers, one per record type, with parents resolved under the source's kind names. */
export interface ProductWriters {
  companyKind: IndependentKind<Company>;
  dealKind: IndependentKind<Deal>;
  leadKind: IndependentKind<Lead>;
  /** Linked to every parent the ledger knows; skipped, as a placeholder, only when it knows none. */
  activityKind: IndependentKind<Activity>;
  noteKind: IndependentKind<Note>;
  /** An email belongs to a deal (app.emails.deal_id is required): skipped when its deal is unknown. */
  emailKind: IndependentKind<Email>;
  /** Persons on the batched path, matched by email (personBatch). */
  personBatch(tenantId: string, parents: ParentMap): BatchWriter<Person>;
  /** Which parent kinds a row of the record type refers to, by the source's kind names. */
  refs(recordType: Parameters<typeof parentRefsOf>[1], row: unknown): Record<string, string | null>;
}

/**
 * The writers, with the source's kind names for the parents. `sameDealPhase`: the parent kinds a
 * source imports in the same phase as its deals (their links then resolved at the barrier).
 */
export function productWriters(
  kinds: ParentKinds,
  options: { sameDealPhase?: readonly string[] } = {},
): ProductWriters {
  return {
    companyKind: companyKindOf(),
    dealKind: { ...dealKindOf(kinds), deferred: options.sameDealPhase ?? [] },
    leadKind: leadKindOf(kinds),
    activityKind: activityKindOf(kinds),
    noteKind: noteKindOf(kinds),
    emailKind: emailKindOf(kinds),
    personBatch: (tenantId, parents) => personBatch(kinds, tenantId, parents),
    refs: (recordType, row) => parentRefsOf(kinds, recordType, row),
  };
}

function companyKindOf(): IndependentKind<Company> {
  return {
    table: companies,
    recordType: "company",
    refs: () => ({}),
    plan: (c) => ({
      values: { name: c.name, address: c.address, customFields: c.customFields, ...deletion(c) },
    }),
  };
}

function dealKindOf(kinds: ParentKinds): IndependentKind<Deal> {
  return {
    table: deals,
    recordType: "deal",
    refs: (row) => parentRefsOf(kinds, "deal", row),
    plan: (d, parents) => ({
      values: {
        title: d.title,
        value: d.value === null ? null : d.value.toFixed(2),
        currency: d.currency,
        status: d.status,
        archived: d.archived,
        contactId: parents.get(kinds.contact, d.person) ?? null,
        companyId: parents.get(kinds.company, d.organization) ?? null,
        customFields: d.customFields,
        ...deletion(d),
      },
    }),
  };
}

function leadKindOf(kinds: ParentKinds): IndependentKind<Lead> {
  return {
    table: leads,
    recordType: "lead",
    refs: (row) => parentRefsOf(kinds, "lead", row),
    plan: (l, parents) => ({
      values: {
        title: l.title,
        valueAmount: l.amount === null ? null : l.amount.toFixed(2),
        valueCurrency: l.currency,
        archived: l.archived,
        contactId: parents.get(kinds.contact, l.person) ?? null,
        companyId: parents.get(kinds.company, l.organization) ?? null,
        customFields: l.customFields,
        ...deletion(l),
      },
    }),
  };
}

function activityKindOf(kinds: ParentKinds): IndependentKind<Activity> {
  return {
    table: activities,
    recordType: "activity",
    refs: (row) => parentRefsOf(kinds, "activity", row),
    plan: (a, parents) => {
      const links = linkedIds(kinds, parents, a);
      return {
        values: {
          subject: a.subject,
          type: a.type,
          dueDate: a.dueDate,
          done: a.done,
          customFields: a.customFields,
          ...links,
          ...deletion(a),
        },
        ...(isLinked(kinds, parents, a) ? {} : { skip: NOT_LINKED }),
      };
    },
  };
}

function noteKindOf(kinds: ParentKinds): IndependentKind<Note> {
  return {
    table: productNotes,
    recordType: "note",
    refs: (row) => parentRefsOf(kinds, "note", row),
    plan: (n, parents) => {
      const links = linkedIds(kinds, parents, n);
      return {
        values: { content: n.content, customFields: n.customFields, ...links, ...deletion(n) },
        ...(isLinked(kinds, parents, n) ? {} : { skip: NOT_LINKED }),
      };
    },
  };
}

function emailKindOf(kinds: ParentKinds): IndependentKind<Email> {
  return {
    table: emails,
    recordType: "email",
    refs: (e) => ({ [kinds.deal]: e.deal }),
    plan: (e, parents) => {
      const dealId = parents.get(kinds.deal, e.deal);
      return {
        values: {
          dealId: dealId ?? null,
          subject: e.subject,
          snippet: e.snippet,
          fromAddress: e.from,
          toAddresses: e.to,
          body: e.body,
          sentAt: e.sentAt,
          ...(e.customFields === undefined ? {} : { customFields: e.customFields }),
          ...deletion(e),
        },
        ...(parents.has(kinds.deal, e.deal) ? {} : { skip: NOT_LINKED }),
      };
    },
  };
}

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
  const [createdRow] = await tx
    .insert(kind.table)
    .values({ tenantId, ...planned.values } as never)
    .returning({ id: kind.table.id });
  return created(kind, row, parents, createdRow!.id);
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
      const inserts: { at: number; row: T; values: Record<string, unknown> }[] = [];
      for (const [at, row] of rows.entries()) {
        if (row.held) {
          results[at] = await writeIndependent(kind, tx, tenantId, row.data, parents, row.held);
          continue;
        }
        const planned = kind.plan(row.data, parents);
        if (planned.skip) results[at] = notLinked(parents, kind.refs(row.data));
        else if (linksToStandIn(parents, kind.refs(row.data)))
          results[at] = { action: "created", recordType: kind.recordType, recordId: 0 };
        else inserts.push({ at, row: row.data, values: { tenantId, ...planned.values } });
      }
      if (inserts.length > 0) {
        // One INSERT ... VALUES returns its rows in the order of its VALUES list: Postgres inserts
        // them in that order and RETURNING reports each as it is inserted.
        const ids = await tx
          .insert(kind.table)
          .values(inserts.map((i) => i.values) as never)
          .returning({ id: kind.table.id });
        if (ids.length !== inserts.length)
          throw new Error(`inserted ${ids.length} ${kind.recordType} rows for ${inserts.length}`);
        for (const [k, insert] of inserts.entries())
          results[insert.at] = created(kind, insert.row, parents, ids[k]!.id);
      }
      return results;
    },
  };
}

/** In a dry run: whether an earlier window of it would have created a contact with this email. */
async function wouldBeContact(
  kinds: ParentKinds,
  tx: Tx,
  parents: ParentMap,
  email: string,
): Promise<boolean> {
  if (!parents.dryRun) return false;
  const key = email.toLowerCase();
  return (await parents.dryRun.matchKeys(tx, kinds.contact, [key])).has(key);
}

/**
 * A person whose email already belongs to a contact of the tenant is matched to it, not created:
 * the customer's product may already know them.
 */
export async function writePerson(
  kinds: ParentKinds,
  tx: Tx,
  tenantId: string,
  p: Person,
  parents: ParentMap,
  held?: HeldSlot,
): Promise<RowResult> {
  if (held) {
    const companyId = parents.get(kinds.company, p.organization) ?? null;
    return applyToHeld(tx, contacts, tenantId, held, "contact", {
      name: p.name,
      email: p.email,
      phone: p.phone,
      companyId,
      customFields: p.customFields,
      ...deletion(p),
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
    if (await wouldBeContact(kinds, tx, parents, p.email))
      return { action: "matched", recordType: "contact", recordId: 0, matchRule: "email" };
  }
  const companyId = parents.get(kinds.company, p.organization) ?? null;
  const [row] = await tx
    .insert(contacts)
    .values({
      tenantId,
      name: p.name,
      email: p.email,
      phone: p.phone,
      companyId,
      customFields: p.customFields,
      ...deletion(p),
    })
    .returning({ id: contacts.id });
  return {
    action: "created",
    recordType: "contact",
    recordId: row!.id,
    ...(p.email ? { matchKey: p.email.toLowerCase() } : {}),
    // Organizations are imported in the same phase: a parent not written yet is linked at the barrier.
    ...(p.organization && companyId === null ? { pendingRefs: { [kinds.company]: p.organization } } : {}),
  };
}

/**
 * Persons on the batched path, with writePerson's rules for the whole window at once: the window
 * locks every email it carries (sorted, so two windows never wait on each other in opposite
 * orders), finds the contacts those emails already belong to in one query, inserts the persons
 * left in one multi-row insert, and matches a later person of the window sharing an email with an
 * earlier one to the contact that earlier one became, exactly as writing them one by one would.
 */
export function personBatch(kinds: ParentKinds, tenantId: string, parents: ParentMap): BatchWriter<Person> {
  return {
    writeRow: (tx, row, _sourceId, held) => writePerson(kinds, tx, tenantId, row, parents, held),
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
          const wouldBe = await parents.dryRun.matchKeys(tx, kinds.contact, keys);
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
        creating.push({ at, person, companyId: parents.get(kinds.company, person.organization) ?? null });
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
              ...deletion(p),
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
              ? { pendingRefs: { [kinds.company]: person.organization } }
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
        if (row.held) results[at] = await writePerson(kinds, tx, tenantId, row.data, parents, row.held);
      return results;
    },
  };
}
