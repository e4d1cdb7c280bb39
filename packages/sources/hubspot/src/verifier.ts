import { sharedRecords, unfilled } from "@drover/product-records";
import {
  comparable,
  PermanentError,
  type ProviderVerifier,
  type SampleEntry,
  type SampleMismatch,
  shownValue,
  type VerifyContext,
  withRetries,
} from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { readByIds } from "./batch-read.js";
import { CATCH_UP } from "./catch-up.js";
import type { HubSpotClient } from "./client.js";
import { listIds } from "./list-pages.js";
import { isObjectType, type ObjectType } from "./object-types.js";
import { pageLinks } from "./page-rows.js";
import { type EmailRow, NO_LINKS, productRow, type RecordLinks } from "./product-rows.js";
import { readProperties } from "./properties.js";
import type { HubSpotRecord } from "./records.js";
import { clientFor } from "./run-client.js";

/**
 * Verification against HubSpot, in the source's own terms:
 * - the source's rows of a type are what its lists hold, live and archived (what HubSpot deleted is
 *   imported too, flagged): both lists walked asking one property only (`sourceIds`);
 * - the cheap count is a search's `total` (live records, one request) plus the archived list's
 *   length, usually a page or two (`sourceCount`); it differs from the import's listing only when a
 *   record came or went since, and the lists are then walked to name it;
 * - a sample is read again by id, a hundred a request (batch read, live then archived), with its
 *   associations, parsed into product rows by the very functions the import used (product-rows.ts),
 *   and compared column by column with the record the ledger points at.
 */

type Obj = Record<string, unknown>;

/** How a product column is compared: its value in the row the source gives now, and its column. */
interface Field {
  name: string;
  column: string;
  value(row: Obj): unknown;
}

/** A link column, and which of the record's kept parents (RecordLinks) it must point at. */
interface Link {
  name: string;
  column: string;
  kind: ObjectType;
  of: keyof RecordLinks;
}

/** A product record type: its table, what is read of it, what is compared. */
interface RecordCheck {
  table: string;
  select: string;
  fields: Field[];
  /** Compared when the row was matched to a record that already existed: only what the match was on. */
  matchedFields: Field[];
  links: Link[];
}

const field = (
  name: string,
  column: string,
  value: (row: Obj) => unknown = (r) => r[name] ?? null,
): Field => ({
  name,
  column,
  value,
});
const customFields = field("customFields", "custom_fields");
const deletedAt = field("deletedAt", "deleted_at");
const companyLink: Link = { name: "company", column: "company_id", kind: "companies", of: "company" };
const contactLink: Link = { name: "contact", column: "contact_id", kind: "contacts", of: "contact" };
const dealLink: Link = { name: "deal", column: "deal_id", kind: "deals", of: "deal" };

/**
 * A timestamp column as epoch milliseconds, as `comparable` gives a Date: the driver answers raw
 * queries with the server's text, which no date parses the same way.
 */
const epochMs = (column: string) =>
  `(round(extract(epoch from ${column}) * 1000))::bigint::text as ${column}`;

/** By the ledger's record type: what the writers (@drover/product-records) store, column by column. */
const RECORDS: Readonly<Record<string, RecordCheck>> = {
  company: {
    table: "companies",
    select: "name, address, custom_fields, " + epochMs("deleted_at"),
    fields: [field("name", "name"), field("address", "address"), customFields, deletedAt],
    matchedFields: [],
    links: [],
  },
  contact: {
    table: "contacts",
    select: "name, email, phone, company_id, custom_fields, " + epochMs("deleted_at"),
    fields: [
      field("name", "name"),
      field("email", "email"),
      field("phone", "phone"),
      customFields,
      deletedAt,
    ],
    // A contact matched by email is the product's own: only the email it was matched on is checked.
    matchedFields: [
      field("email", "email", (r) => (typeof r.email === "string" ? r.email.toLowerCase() : null)),
    ],
    links: [companyLink],
  },
  deal: {
    table: "deals",
    select: "title, value::text as value, currency, status, contact_id, company_id, custom_fields",
    fields: [
      field("title", "title"),
      field("value", "value", (r) => (typeof r.value === "number" ? r.value.toFixed(2) : null)),
      field("currency", "currency"),
      field("status", "status"),
      customFields,
    ],
    matchedFields: [],
    links: [contactLink, companyLink],
  },
  note: {
    table: "notes",
    select: "content, deal_id, contact_id, company_id, custom_fields, " + epochMs("deleted_at"),
    fields: [field("content", "content"), customFields, deletedAt],
    matchedFields: [],
    links: [dealLink, contactLink, companyLink],
  },
  activity: {
    table: "activities",
    select:
      "subject, type, due_date::text as due_date, done, deal_id, contact_id, company_id, custom_fields, " +
      epochMs("deleted_at"),
    fields: [
      field("subject", "subject"),
      field("type", "type"),
      field("dueDate", "due_date"),
      // A meeting is done once it has started: the import said so as of its read, which a later
      // read may not (time moved on), so it is not compared.
      field("done", "done", (r) => (r.type === "meeting" ? SKIP : r.done)),
      customFields,
      deletedAt,
    ],
    matchedFields: [],
    links: [dealLink, contactLink, companyLink],
  },
  email: {
    table: "emails",
    select: `subject, from_address, to_addresses, body, ${epochMs("sent_at")}, deal_id, custom_fields, ${epochMs("deleted_at")}`,
    fields: [
      field("subject", "subject"),
      field("from", "from_address"),
      field("to", "to_addresses"),
      field("body", "body"),
      field("sentAt", "sent_at"),
      customFields,
      deletedAt,
    ],
    matchedFields: [],
    links: [dealLink],
  },
};

/** A field left out of the comparison for this row. */
const SKIP = Symbol("not compared");

/** One list page asks only this: the ids are what is wanted. */

export const hubspotVerifier: ProviderVerifier = {
  async sourceIds(ctx, kind) {
    if (kind === CATCH_UP) return [];
    const type = objectType(kind);
    const memoKey = `ids:${type}`;
    const known = ctx.memo.get(memoKey) as string[] | undefined;
    if (known) return known;
    const client = clientFor(ctx.run, ctx.pacer);
    const ids = [
      ...(await verifiedListIds(ctx, client, type, false)),
      ...(await archivedIds(ctx, client, type)),
    ];
    ctx.memo.set(memoKey, ids);
    return ids;
  },

  async sourceCount(ctx, kind) {
    if (kind === CATCH_UP) return undefined;
    const type = objectType(kind);
    const client = clientFor(ctx.run, ctx.pacer);
    const answer = await withRetries(
      () =>
        client.search<{ total?: unknown }>(
          `/crm/v3/objects/${type}/search`,
          { filterGroups: [], properties: ["hs_object_id"], limit: 1 },
          ctx.signal,
        ),
      { signal: ctx.signal },
    );
    if (typeof answer?.total !== "number") return undefined;
    return answer.total + (await archivedIds(ctx, client, type)).length;
  },

  async compareSample(ctx, kind, entries) {
    if (kind === CATCH_UP || entries.length === 0) return [];
    const type = objectType(kind);
    const client = clientFor(ctx.run, ctx.pacer);
    const properties = await withRetries(() => readProperties(client, type, ctx.signal), {
      signal: ctx.signal,
    });
    const ids = entries.map((e) => e.sourceId);
    const read = await readLiveThenArchived(ctx, client, type, ids, properties.names);
    const links = await withRetries(() => pageLinks(client, type, [...read.keys()], ctx.signal), {
      signal: ctx.signal,
    });
    const records = await destinationRecords(ctx, entries);
    const parents = await resolveParents(ctx, links);
    const shared = await sharedRecords(ctx, entries);
    const now = Date.now();
    const out: SampleMismatch[] = [];
    for (const entry of entries) {
      const what = `${entry.recordType} ${entry.recordId}`;
      const check = RECORDS[entry.recordType];
      const record = records.get(`${entry.recordType}\u0000${entry.recordId}`);
      if (!check || !record) {
        out.push({
          sourceId: entry.sourceId,
          problem: `the ledger points at ${what}, which does not exist for this tenant`,
        });
        continue;
      }
      const got = read.get(entry.sourceId);
      if (!got) {
        out.push({
          sourceId: entry.sourceId,
          problem: `the source has it neither live nor archived, but the ledger has it as ${what}`,
        });
        continue;
      }
      const recordLinks = links.get(entry.sourceId) ?? NO_LINKS;
      let row: Obj;
      try {
        row = asRecordType(productRow(type, got, recordLinks, properties.custom, now), entry.recordType);
      } catch (err) {
        out.push({
          sourceId: entry.sourceId,
          problem: `${(err as Error).message} in the source, but the ledger has it as ${what}`,
        });
        continue;
      }
      const fields = entry.action === "matched" ? check.matchedFields : check.fields;
      const filledBySharer = entry.action === "created" && shared.has(String(entry.recordId));
      for (const f of fields) {
        const source = f.value(row);
        if (source === SKIP) continue;
        const stored = filledBySharer ? unfilled(source, record[f.column]) : record[f.column];
        const want = comparable(source);
        const have = comparable(
          entry.action === "matched" && typeof stored === "string" ? stored.toLowerCase() : stored,
        );
        if (want !== have)
          out.push({
            sourceId: entry.sourceId,
            problem: `${f.name} is ${shownValue(want)} in the source but ${shownValue(have)} in ${what}`,
          });
      }
      // A matched record is the product's own: its links are not ours to check.
      if (entry.action === "matched") continue;
      for (const l of check.links) {
        const refId = recordLinks[l.of];
        const want = refId === null ? null : (parents.get(`${l.kind}\u0000${refId}`) ?? null);
        const have =
          record[l.column] === null || record[l.column] === undefined ? null : String(record[l.column]);
        if (want !== have)
          out.push({
            sourceId: entry.sourceId,
            problem: `${l.name} link is ${have ?? "empty"} in ${what} but should be ${want ?? "empty"} (${
              refId === null ? "the source associates none" : `source ${l.kind} ${refId}`
            })`,
          });
      }
    }
    return out;
  },
};

function objectType(kind: string): ObjectType {
  if (!isObjectType(kind)) throw new PermanentError(`the hubspot source has no kind "${kind}"`);
  return kind;
}

/** A HubSpot email is kept as an email (its deal known) or an activity: the form its record took. */
function asRecordType(row: ReturnType<typeof productRow>, recordType: string): Obj {
  if ("email" in row && "activity" in row) {
    const both = row as EmailRow;
    return (recordType === "email" ? both.email : both.activity) as unknown as Obj;
  }
  return row as unknown as Obj;
}

/** A list's ids, each page read again while the source answers it transiently. */
function verifiedListIds(
  ctx: VerifyContext,
  client: HubSpotClient,
  type: ObjectType,
  archived: boolean,
): Promise<string[]> {
  return listIds(client, type, archived, {
    signal: ctx.signal,
    readPage: (read) => withRetries(read, { signal: ctx.signal }),
  });
}

/** The archived list's ids, walked once per verification (the count and the listing both need it). */
async function archivedIds(ctx: VerifyContext, client: HubSpotClient, type: ObjectType): Promise<string[]> {
  const memoKey = `archived:${type}`;
  const known = ctx.memo.get(memoKey) as string[] | undefined;
  if (known) return known;
  const ids = await verifiedListIds(ctx, client, type, true);
  ctx.memo.set(memoKey, ids);
  return ids;
}

/** The sample's records by id: live first, then the misses among the archived. */
async function readLiveThenArchived(
  ctx: VerifyContext,
  client: HubSpotClient,
  type: ObjectType,
  ids: readonly string[],
  properties: readonly string[],
): Promise<Map<string, HubSpotRecord>> {
  const out = new Map<string, HubSpotRecord>();
  const read = (wanted: readonly string[], archived: boolean) =>
    withRetries(() => readByIds(client, type, wanted, { properties, archived, signal: ctx.signal }), {
      signal: ctx.signal,
    });
  const live = await read(ids, false);
  for (const row of live.rows) if ("record" in row) out.set(row.record.id, row.record);
  const missed = ids.filter((id) => !out.has(id));
  if (missed.length > 0) {
    const archived = await read(missed, true);
    for (const row of archived.rows) if ("record" in row) out.set(row.record.id, row.record);
  }
  return out;
}

/** The destination records the sample's ledger rows point at, one query per record type. */
async function destinationRecords(
  ctx: VerifyContext,
  entries: readonly SampleEntry[],
): Promise<Map<string, Obj>> {
  const out = new Map<string, Obj>();
  const byType = new Map<string, string[]>();
  for (const e of entries)
    byType.set(e.recordType, [...(byType.get(e.recordType) ?? []), String(e.recordId)]);
  for (const [recordType, ids] of byType) {
    const check = RECORDS[recordType];
    if (!check) continue;
    const rows = await ctx.db.execute<Obj>(sql`
      select id::text as id, ${sql.raw(check.select)}
        from ${sql.identifier("app")}.${sql.identifier(check.table)}
       where tenant_id = ${ctx.run.tenantId} and id = any(${sql.param(ids)}::bigint[])`);
    for (const r of rows) out.set(`${recordType}\u0000${String(r.id)}`, r);
  }
  return out;
}

/** Each kept parent's local id, as the ledger holds it (created or matched), in one query. */
async function resolveParents(
  ctx: VerifyContext,
  links: ReadonlyMap<string, RecordLinks>,
): Promise<Map<string, string>> {
  const wanted: Record<string, string[]> = {};
  const add = (kind: string, id: string | null) => {
    if (id === null) return;
    wanted[kind] ??= [];
    wanted[kind].push(id);
  };
  for (const l of links.values()) {
    add("companies", l.company);
    add("contacts", l.contact);
    add("deals", l.deal);
  }
  const out = new Map<string, string>();
  if (Object.keys(wanted).length === 0) return out;
  const held = await ctx.ledger.recordIds(wanted);
  for (const [kind, ids] of Object.entries(wanted))
    for (const id of ids) {
      const recordId = held.get(kind, id);
      if (recordId !== undefined) out.set(`${kind}\u0000${id}`, String(recordId));
    }
  return out;
}
