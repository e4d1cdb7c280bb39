import { sharedRecords, unfilled } from "@drover/product-records";
import {
  comparable,
  PermanentError,
  type ProviderVerifier,
  RowError,
  type SampleEntry,
  type SampleMismatch,
  type SourceClient,
  shownValue,
  type VerifyContext,
  withRetries,
} from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { sourceId, standInId } from "./fields.js";
import { readListPage, readWholeList } from "./list-walker.js";
import { CATCH_UP, KIND_LISTS, type SourceList } from "./lists.js";
import { listMessages, pooled } from "./mail.js";
import { MAIL_COUNT_FIELD, mailCountOf } from "./mail-counts.js";
import {
  parseActivity,
  parseCompany,
  parseDeal,
  parseEmail,
  parseLead,
  parseNote,
  parsePerson,
  unwrapMail,
} from "./records.js";
import { rowsByIds } from "./rows-by-ids.js";

/**
 * Verification for the crm source: whether what the import listed is what the source holds, and
 * whether a sample of what was imported still matches it field by field.
 *
 * The engine takes the source's rows from what the import listed (the tasks' listed ids). The
 * source is asked only for what that listing cannot say, as cheaply as Pipedrive allows:
 * - a count, where Pipedrive can give one without a walk: a v1 offset list (leads, notes) is
 *   probed at the position where the import's listing ended (`start` = listed - 1, `limit` 2: one
 *   row and no more means exactly that many). Pipedrive has no count for its v2 cursor lists and
 *   no account-wide mail list: those rest on the import's listing (see docs/design.md);
 * - the sample: v2 kinds by `ids` (up to 100 rows a request, as GET /api/v2/<kind> documents),
 *   leads and notes by id, mail through the deal the message was imported under (the deal's list
 *   must still name it, and carries the body where the account's list does);
 * - only when a count disagrees, or the run kept no complete listing, the kind's lists are walked
 *   again (`sourceIds`), as an import walks them: mail then costs one list call per deal.
 */

const PAGE_LIMIT = 500;
/** List pages fetched side by side once a kind has more than one. */
const PAGES_AT_ONCE = 4;
/**
 * Leads, notes and mail are fetched one request per sampled row: they compare a fifth of the
 * sample (40 of the default 200). A mapping mistake in a writer shows on nearly every row; 40
 * random rows still find one that touches 7 % of the rows with 95 % probability, for 40 requests
 * instead of 200 per kind, which was most of what verifying cost.
 */
const PER_ROW_SAMPLE_SHARE = 5;
/**
 * Deals whose mail is listed, and sampled rows fetched, side by side. The budget decides the pace;
 * this only keeps enough calls waiting that each lease of slots serves several.
 */
const LIST_CONCURRENCY = 16;
const GET_CONCURRENCY = 16;

type Obj = Record<string, unknown>;

/** One compared field: its value as the source has it (parsed as the import parses it) and the destination column. */
interface Field {
  name: string;
  source(row: Obj): unknown;
  column: string;
}

/** A parent reference the destination keeps as a link column, resolved through the ledger. */
interface Link {
  name: string;
  kind: string;
  ref(row: Obj): string | null;
  column: string;
}

interface KindCheck {
  table: string;
  /** A v2 list that takes `ids`: sampled rows are fetched a hundred a request, GET by id only for what it leaves out. */
  batch?: { path: string; params?: Record<string, string> };
  /** What the destination record is called in messages (the ledger's record_type). */
  select: string;
  fetch(id: string): { path: string; params?: Record<string, string | number> };
  /** `listedIn`: the deal whose list names the message (mail only: a message names no deal itself). */
  parse(raw: unknown, listedIn?: string): Obj;
  /** Compared for a record this run (or an earlier one) created. */
  fields: Field[];
  /** Compared when the row was matched to a record that already existed: only what the match was on. */
  matchedFields: Field[];
  links: Link[];
}

const text = (name: string, column = name): Field => ({ name, column, source: (r) => r[name] ?? null });
const money = (name: string, column: string): Field => ({
  name,
  column,
  source: (r) => (typeof r[name] === "number" ? (r[name] as number).toFixed(2) : null),
});
const link = (name: string, kind: string, column: string): Link => ({
  name,
  kind,
  column,
  ref: (r) => (r[name] as string | null) ?? null,
});
const parentLinks = [
  link("deal", "deals", "deal_id"),
  link("person", "persons", "contact_id"),
  link("organization", "organizations", "company_id"),
  link("lead", "leads", "lead_id"),
];
const row = (kind: string) => (id: string) => ({ path: `/v1/${kind}/${encodeURIComponent(id)}` });
const rowV2 = (kind: string) => (id: string) => ({ path: `/api/v2/${kind}/${encodeURIComponent(id)}` });

/** The comparable fields per kind: what the writers (writers.ts) store, column by column. */
export const COMPARED: Readonly<Record<string, KindCheck>> = {
  organizations: {
    table: "companies",
    select: "name, address, custom_fields",
    fetch: rowV2("organizations"),
    batch: { path: "/api/v2/organizations" },
    parse: (raw) => parseCompany(raw) as unknown as Obj,
    fields: [text("name"), text("address"), text("customFields", "custom_fields")],
    matchedFields: [],
    links: [],
  },
  persons: {
    table: "contacts",
    select: "name, email, phone, custom_fields, company_id",
    fetch: rowV2("persons"),
    batch: { path: "/api/v2/persons" },
    parse: (raw) => parsePerson(raw) as unknown as Obj,
    fields: [text("name"), text("email"), text("phone"), text("customFields", "custom_fields")],
    // A person matched to a contact the product already had is the same person by email only.
    matchedFields: [
      { name: "email", column: "email", source: (r) => (r.email as string | null)?.toLowerCase() ?? null },
    ],
    links: [link("organization", "organizations", "company_id")],
  },
  deals: {
    table: "deals",
    select: "title, value::text as value, currency, status, archived, custom_fields, contact_id, company_id",
    fetch: rowV2("deals"),
    // Archived deals are not in this list: the rows it leaves out are fetched by id.
    batch: { path: "/api/v2/deals", params: { status: "open,won,lost,deleted" } },
    parse: (raw) => parseDeal(raw) as unknown as Obj,
    fields: [
      text("title"),
      money("value", "value"),
      text("currency"),
      text("status"),
      // A deal fetched by id says itself whether it is archived (is_archived), in either list.
      text("archived"),
      text("customFields", "custom_fields"),
    ],
    matchedFields: [],
    links: [link("person", "persons", "contact_id"), link("organization", "organizations", "company_id")],
  },
  leads: {
    table: "leads",
    select:
      "title, value_amount::text as value_amount, value_currency, archived, custom_fields, contact_id, company_id",
    fetch: row("leads"),
    parse: (raw) => parseLead(raw) as unknown as Obj,
    fields: [
      text("title"),
      money("amount", "value_amount"),
      text("currency", "value_currency"),
      text("archived"),
      text("customFields", "custom_fields"),
    ],
    matchedFields: [],
    links: [link("person", "persons", "contact_id"), link("organization", "organizations", "company_id")],
  },
  activities: {
    table: "activities",
    select: "subject, type, due_date::text as due_date, done, deal_id, contact_id, company_id, lead_id",
    fetch: rowV2("activities"),
    batch: { path: "/api/v2/activities" },
    parse: (raw) => parseActivity(raw) as unknown as Obj,
    fields: [text("subject"), text("type"), text("dueDate", "due_date"), text("done")],
    matchedFields: [],
    links: parentLinks,
  },
  notes: {
    table: "notes",
    select: "content, deal_id, contact_id, company_id, lead_id",
    fetch: row("notes"),
    parse: (raw) => parseNote(raw) as unknown as Obj,
    fields: [text("content")],
    matchedFields: [],
    links: parentLinks,
  },
  mail: {
    table: "emails",
    select:
      "subject, snippet, from_address, to_addresses, body, (extract(epoch from sent_at) * 1000)::bigint::text as sent_at_ms, deal_id",
    fetch: (id) => ({
      path: `/v1/mailbox/mailMessages/${encodeURIComponent(id)}`,
      params: { include_body: 1 },
    }),
    parse: (raw, listedIn) => {
      // The message as the import stores it: the body from the same include_body fetch, "" as none.
      // GET /v1/mailbox/mailMessages/{id} names no deal: the message belongs to the deal whose list
      // it is found in, as the import took it.
      const data = unwrapMail(raw) as Obj;
      if (listedIn === undefined) throw new RowError("no deal of the source lists the message any more");
      const body = typeof data.body === "string" && data.body !== "" ? data.body : null;
      return parseEmail(data, listedIn, body) as unknown as Obj;
    },
    fields: [
      text("subject"),
      text("snippet"),
      text("from", "from_address"),
      text("to", "to_addresses"),
      text("body"),
      { name: "sentAt", column: "sent_at_ms", source: (r) => (r.sentAt as Date | null)?.getTime() ?? null },
    ],
    matchedFields: [],
    links: [link("deal", "deals", "deal_id")],
  },
};

export const crmVerifier: ProviderVerifier = {
  async sourceIds(ctx, kind) {
    const memoKey = `ids:${kind}`;
    const known = ctx.memo.get(memoKey) as string[] | undefined;
    if (known) return known;
    const client = verifyClient(ctx);
    let ids: string[];
    if (kind === CATCH_UP) {
      // Not a kind of row: its tasks write under the kinds they catch up.
      ids = [];
    } else if (kind === "mail") {
      const deals = (await crmVerifier.sourceIds(ctx, "deals")).filter((id) => sourceIdPattern.test(id));
      // The deal lists' walk also said how many messages each deal has: a deal with none costs no list.
      const counts = ctx.memo.get(MAIL_COUNTS_MEMO) as Map<string, number> | undefined;
      ids = await mailIds(
        ctx,
        client,
        deals.filter((deal) => counts?.get(deal) !== 0),
      );
    } else {
      const lists = KIND_LISTS[kind];
      if (!lists) throw new PermanentError(`crm provider has no kind "${kind}"`);
      ids = [];
      for (const [i, list] of lists.entries()) ids.push(...(await listIds(ctx, client, kind, i, list)));
    }
    ctx.memo.set(memoKey, ids);
    return ids;
  },

  async sourceCount(ctx, kind) {
    const lists = KIND_LISTS[kind];
    // v2 cursor lists cannot be addressed by position, and mail has no account-wide list.
    if (!lists || lists.some((l) => l.api !== "v1")) return undefined;
    const client = verifyClient(ctx);
    let total = 0;
    for (const [i, list] of lists.entries()) total += await v1ListCount(ctx, client, kind, i, list);
    return total;
  },

  sampleLimit(kind, sampleSize) {
    return COMPARED[kind]?.batch ? sampleSize : Math.ceil(sampleSize / PER_ROW_SAMPLE_SHARE);
  },

  async compareSample(ctx, kind, entries) {
    if (kind === CATCH_UP) return [];
    const check = COMPARED[kind];
    if (!check) throw new PermanentError(`crm provider has no kind "${kind}"`);
    if (entries.length === 0) return [];
    const client = verifyClient(ctx);
    const records = await destinationRecords(ctx, check, entries);
    const fetched =
      kind === "mail"
        ? await fetchMailSample(ctx, client, check, entries, records)
        : await fetchSample(ctx, client, check, entries);
    const parents = await resolveParents(ctx, check, fetched);
    const shared = await sharedRecords(ctx, entries);
    const out: SampleMismatch[] = [];
    for (const entry of entries) {
      const what = `${entry.recordType} ${entry.recordId}`;
      const record = records.get(String(entry.recordId));
      if (!record) {
        out.push({
          sourceId: entry.sourceId,
          problem: `the ledger points at ${what}, which does not exist for this tenant`,
        });
        continue;
      }
      const got = fetched.get(entry.sourceId)!;
      if ("problem" in got) {
        out.push({ sourceId: entry.sourceId, problem: `${got.problem}, but the ledger has it as ${what}` });
        continue;
      }
      const fields = entry.action === "matched" ? check.matchedFields : check.fields;
      const filledBySharer = entry.action === "created" && shared.has(String(entry.recordId));
      for (const field of fields) {
        const source = field.source(got.row);
        const stored = filledBySharer ? unfilled(source, record[field.column]) : record[field.column];
        const want = comparable(source);
        const have = comparable(
          entry.action === "matched" && typeof stored === "string" ? stored.toLowerCase() : stored,
        );
        if (want !== have) {
          out.push({
            sourceId: entry.sourceId,
            problem: `${field.name} is ${shownValue(want)} in the source but ${shownValue(have)} in ${what}`,
          });
        }
      }
      // A matched record is the product's own: its links are not ours to check.
      if (entry.action === "matched") continue;
      for (const l of check.links) {
        const refId = l.ref(got.row);
        const want = refId === null ? null : (parents.get(`${l.kind}\u0000${refId}`) ?? null);
        const have =
          record[l.column] === null || record[l.column] === undefined ? null : String(record[l.column]);
        if (want !== have) {
          out.push({
            sourceId: entry.sourceId,
            problem: `${l.name} link is ${have ?? "empty"} in ${what} but should be ${want ?? "empty"} (${
              refId === null ? "the source row has none" : `source ${l.kind} ${refId}`
            })`,
          });
        }
      }
    }
    return out;
  },
};

const sourceIdPattern = /^[1-9]\d{0,18}$/;

function verifyClient(ctx: VerifyContext): SourceClient {
  const { baseUrl } = runSettings(ctx.run);
  return clientFor(ctx.run, baseUrl, ctx.pacer);
}

/** The ids of one list's rows, as the import names them: stand-in ids for rows without a usable id. */
async function listIds(
  ctx: VerifyContext,
  client: SourceClient,
  kind: string,
  listIndex: number,
  list: SourceList,
): Promise<string[]> {
  const read = (filters: Record<string, string>) =>
    readWholeList(client, list, PAGE_LIMIT, {
      signal: ctx.signal,
      attempt: (request) => withRetries(request, { signal: ctx.signal }),
      pagesAtOnce: PAGES_AT_ONCE,
      filters,
    });
  const askCounts = list.mailCounts === true && ctx.run.plan.flat().includes("mail");
  let rows: unknown[];
  if (!askCounts) rows = await read({});
  else {
    // Asked of the same pages at the same price; an account that refuses the parameter (a 4xx)
    // is walked without it, and its deals' mail listed as before.
    const counted = await read({ include_fields: MAIL_COUNT_FIELD }).catch((err) => {
      if (err instanceof PermanentError) return undefined;
      throw err;
    });
    rows = counted ?? (await read({}));
    if (counted) rememberMailCounts(ctx, counted);
  }
  return rows.map((raw) => sourceId(raw) ?? standInId(kind, listIndex, raw));
}

/** ctx.memo key: each deal's message count, as the deal lists stated it (a deal missing: unknown). */
const MAIL_COUNTS_MEMO = "mail-counts:deals";

function rememberMailCounts(ctx: VerifyContext, raws: readonly unknown[]): void {
  const counts = (ctx.memo.get(MAIL_COUNTS_MEMO) as Map<string, number> | undefined) ?? new Map();
  ctx.memo.set(MAIL_COUNTS_MEMO, counts);
  for (const raw of raws) {
    const deal = sourceId(raw);
    const count = mailCountOf(raw);
    // Only a count the source stated: a missing or unreadable one leaves the deal's mail listed.
    if (deal !== null && typeof count === "number") counts.set(deal, count);
  }
}

/** Every message of every deal, one deal's list at a time per lane. */
async function mailIds(
  ctx: VerifyContext,
  client: SourceClient,
  deals: readonly string[],
): Promise<string[]> {
  const perDeal: string[][] = new Array(deals.length);
  let next = 0;
  const lane = async () => {
    while (next < deals.length) {
      const i = next++;
      const deal = deals[i]!;
      let messages: unknown[];
      try {
        messages = await withRetries(() => listMessages(client, deal, PAGE_LIMIT, ctx.signal), {
          signal: ctx.signal,
        });
      } catch (err) {
        // A deal gone since it was listed has no mail to count.
        if (err instanceof PermanentError && / 404\b/.test(err.message)) messages = [];
        else throw err;
      }
      // Named as walkMail names a message without a usable id.
      perDeal[i] = messages.map((raw, j) => sourceId(raw) ?? `mail@deal${deal}#${j}`);
    }
  };
  await Promise.all(Array.from({ length: LIST_CONCURRENCY }, lane));
  return perDeal.flat();
}

type Fetched = { row: Obj } | { problem: string };

/**
 * How many rows a v1 list holds now, checked at the position where the import's listing of it
 * ended: one request when they agree; the list is walked only when they do not.
 */
async function v1ListCount(
  ctx: VerifyContext,
  client: SourceClient,
  kind: string,
  listIndex: number,
  list: SourceList,
): Promise<number> {
  const listed = await ctx.listedCount(kind, { list: listIndex });
  const probe = await readListPage(client, list, { start: Math.max(0, listed - 1) }, listed === 0 ? 1 : 2, {
    signal: ctx.signal,
    attempt: (request) => withRetries(request, { signal: ctx.signal }),
  });
  if (listed === 0 ? probe.rows.length === 0 : probe.rows.length === 1 && !probe.more) return listed;
  return (await listIds(ctx, client, kind, listIndex, list)).length;
}

/** Each sampled row, fetched again and parsed the way the import parses it. */
async function fetchSample(
  ctx: VerifyContext,
  client: SourceClient,
  check: KindCheck,
  entries: readonly SampleEntry[],
): Promise<Map<string, Fetched>> {
  const out = new Map<string, Fetched>();
  if (check.batch) {
    const rows = await rowsByIds(
      client,
      check.batch,
      entries.map((e) => e.sourceId),
      { signal: ctx.signal, attempt: (request) => withRetries(request, { signal: ctx.signal }) },
    );
    for (const [id, raw] of rows) out.set(id, parsed(check, raw));
  }
  // What the batch left out (an archived deal, a row gone since) is asked for by id: a 404 says gone.
  const rest = entries.filter((e) => !out.has(e.sourceId));
  await pooled(rest, GET_CONCURRENCY, async (entry) => {
    out.set(entry.sourceId, await fetchRow(ctx, client, check, entry.sourceId, undefined));
  });
  return out;
}

/**
 * A message names no deal: it belongs to the deal whose list holds it. So each sampled message is
 * looked for in the list of the deal its record is linked to (one list call per deal, with bodies
 * where the account's list carries them): found there, the link is proven and its fields are
 * compared; a body the list does not carry is fetched by id.
 */
async function fetchMailSample(
  ctx: VerifyContext,
  client: SourceClient,
  check: KindCheck,
  entries: readonly SampleEntry[],
  records: ReadonlyMap<string, Obj>,
): Promise<Map<string, Fetched>> {
  const localDeals = [...new Set([...records.values()].map((r) => r.deal_id).filter((d) => d != null))].map(
    String,
  );
  const dealOfRecord = await ctx.ledger.sourceIdsOfRecords("deals", localDeals);
  const dealOf = (entry: SampleEntry): string | undefined => {
    const deal = records.get(String(entry.recordId))?.deal_id;
    return deal == null ? undefined : dealOfRecord.get(String(deal));
  };
  const deals = [...new Set(entries.map(dealOf).filter((d): d is string => d !== undefined))];
  const listed = new Map<string, Map<string, unknown>>();
  await pooled(deals, LIST_CONCURRENCY, async (deal) => {
    let messages: unknown[];
    try {
      messages = await withRetries(() => listMessages(client, deal, PAGE_LIMIT, ctx.signal, true), {
        signal: ctx.signal,
      });
    } catch (err) {
      if (err instanceof PermanentError && / 404\b/.test(err.message)) messages = [];
      else throw err;
    }
    listed.set(deal, new Map(messages.flatMap((m) => (sourceId(m) === null ? [] : [[sourceId(m)!, m]]))));
  });
  const out = new Map<string, Fetched>();
  await pooled(entries, GET_CONCURRENCY, async (entry) => {
    const deal = dealOf(entry);
    const message = deal === undefined ? undefined : listed.get(deal)?.get(entry.sourceId);
    if (deal === undefined || message === undefined) {
      out.set(entry.sourceId, {
        problem:
          deal === undefined
            ? "the record is linked to no deal the ledger knows, so no deal's list can prove it"
            : `the source's deal ${deal} does not list the message`,
      });
      return;
    }
    const data = unwrapMail(message) as { has_body_flag?: unknown; body?: unknown };
    const bodyListed =
      (typeof data.body === "string" && data.body !== "") ||
      (data.has_body_flag !== 1 && data.has_body_flag !== true);
    out.set(
      entry.sourceId,
      bodyListed ? parsed(check, data, deal) : await fetchRow(ctx, client, check, entry.sourceId, deal),
    );
  });
  return out;
}

function parsed(check: KindCheck, raw: unknown, listedIn?: string): Fetched {
  try {
    return { row: check.parse(raw, listedIn) };
  } catch (err) {
    if (!(err instanceof RowError)) throw err;
    return { problem: `the source row no longer parses (${err.message})` };
  }
}

async function fetchRow(
  ctx: VerifyContext,
  client: SourceClient,
  check: KindCheck,
  id: string,
  listedIn: string | undefined,
): Promise<Fetched> {
  const { path, params } = check.fetch(id);
  let body: { data?: unknown } | null;
  try {
    body = await withRetries(() => client.getJson<{ data?: unknown }>(path, params, "get", ctx.signal), {
      signal: ctx.signal,
    });
  } catch (err) {
    if (err instanceof PermanentError && / 404\b/.test(err.message))
      return { problem: "no longer in the source (404)" };
    throw err;
  }
  if (typeof body?.data !== "object" || body.data === null)
    return { problem: "the source answered without the row" };
  return parsed(check, body.data, listedIn);
}

/** The destination records the sample's ledger rows point to, in one query. */
async function destinationRecords(
  ctx: VerifyContext,
  check: KindCheck,
  entries: readonly SampleEntry[],
): Promise<Map<string, Obj>> {
  const ids = entries.map((e) => String(e.recordId));
  const rows = await ctx.db.execute<Obj>(sql`
    select id::text as id, ${sql.raw(check.select)}
      from ${sql.identifier("app")}.${sql.identifier(check.table)}
     where tenant_id = ${ctx.run.tenantId} and id = any(${sql.param(ids)}::bigint[])`);
  return new Map(rows.map((r) => [String(r.id), r]));
}

/** Source id of a parent -> the local id the ledger gives it (created or matched), in one query. */
async function resolveParents(
  ctx: VerifyContext,
  check: KindCheck,
  fetched: ReadonlyMap<string, Fetched>,
): Promise<Map<string, string>> {
  const kinds: string[] = [];
  const ids: string[] = [];
  for (const got of fetched.values()) {
    if (!("row" in got)) continue;
    for (const l of check.links) {
      const id = l.ref(got.row);
      if (id === null) continue;
      kinds.push(l.kind);
      ids.push(id);
    }
  }
  if (ids.length === 0) return new Map();
  const wanted: Record<string, string[]> = {};
  for (const [i, kind] of kinds.entries()) wanted[kind] = [...(wanted[kind] ?? []), ids[i]!];
  const held = await ctx.ledger.recordIds(wanted);
  const out = new Map<string, string>();
  for (const [i, kind] of kinds.entries()) {
    const recordId = held.get(kind, ids[i]);
    if (recordId !== undefined) out.set(`${kind}\u0000${ids[i]}`, String(recordId));
  }
  return out;
}
