import type { Database, Tx } from "@drover/db";
import type { BatchWriter, ParentMap, WritableRow } from "@drover/provider-sdk";
import {
  activityKind,
  companyKind,
  dealKind,
  emailKind,
  independentBatch,
  KIND_LISTS,
  leadKind,
  noteKind,
  parseActivity,
  parseCompany,
  parseDeal,
  parseEmail,
  parseLead,
  parseNote,
  parsePerson,
  personBatch,
  sourceId,
  unwrapMail,
} from "@drover/source-crm";

/**
 * The yardstick of crm_vs_plain_upsert: a whole crm import as a plain script would do it, in one
 * process, with no ledger, no tasks, no queue, no checkpoints. It reads every list of the account
 * page by page (the next page fetched while the current one is written), parses each row with the
 * crm provider's own parsers and writes each window of `windowSize` rows in one transaction through
 * the provider's own batch writers (one multi-row insert per window; persons matched by email as
 * the engine does), into the same product tables. Parents are found in memory (source id → record
 * id per kind) instead of through the ledger; kinds go parents first, then each deal's mail
 * (listed four deals at a time, bodies from the list when it carries them, else fetched per
 * message). A row that does not parse, or that links to nothing, is counted and not written, as
 * the engine counts it failed or skipped.
 */

type Raw = Record<string, unknown>;

export interface PlainCrmImportOptions {
  sandboxUrl: string;
  apiToken: string;
  tenantId: string;
  pageSize?: number;
  windowSize?: number;
  /** Deals whose mail is listed at once. */
  mailConcurrency?: number;
}

export interface PlainCrmImportResult {
  /** Every listed row, written or not. */
  rows: number;
  written: number;
  seconds: number;
  byKind: Record<string, number>;
}

const PARSERS: Record<string, (raw: unknown) => unknown> = {
  organizations: parseCompany,
  persons: parsePerson,
  deals: parseDeal,
  leads: parseLead,
  activities: parseActivity,
  notes: parseNote,
};

const KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"] as const;

export async function plainCrmImport(
  database: Database,
  options: PlainCrmImportOptions,
): Promise<PlainCrmImportResult> {
  const pageSize = options.pageSize ?? 500;
  const windowSize = options.windowSize ?? 250;
  const records = new Map<string, Map<string, number>>();
  const get = (kind: string, id: string | null | undefined) => (id ? records.get(kind)?.get(id) : undefined);
  const parents: ParentMap = { get, has: (kind, id) => get(kind, id) !== undefined };
  const total = { rows: 0, written: 0 };
  const byKind: Record<string, number> = {};
  const started = performance.now();

  const write = async (kind: string, writer: BatchWriter<unknown>, rows: WritableRow<unknown>[]) => {
    const known = records.get(kind) ?? new Map<string, number>();
    records.set(kind, known);
    for (let i = 0; i < rows.length; i += windowSize) {
      const window = rows.slice(i, i + windowSize);
      const results = await database.db.transaction((tx: Tx) => writer.writeBatch(tx, window));
      results.forEach((r, k) => {
        if (r.action === "created" || r.action === "matched") {
          known.set(window[k]!.sourceId, r.recordId);
          total.written++;
        }
      });
    }
  };

  for (const kind of KINDS) {
    const writer = (
      kind === "persons"
        ? personBatch(options.tenantId, parents)
        : independentBatch(
            {
              organizations: companyKind,
              deals: dealKind,
              leads: leadKind,
              activities: activityKind,
              notes: noteKind,
            }[kind] as never,
            options.tenantId,
            parents,
          )
    ) as BatchWriter<unknown>;
    for (const list of KIND_LISTS[kind] ?? []) {
      const pageAt = (at: string | number | null) => fetchListPage(options, list, at, pageSize);
      let next = pageAt(list.api === "v2" ? null : 0);
      for (;;) {
        const page = await next;
        if (page.next !== undefined) next = pageAt(page.next);
        total.rows += page.rows.length;
        byKind[kind] = (byKind[kind] ?? 0) + page.rows.length;
        const rows: WritableRow<unknown>[] = [];
        for (const raw of page.rows) {
          const id = sourceId(raw);
          if (id === null) continue;
          try {
            const data = PARSERS[kind]!(raw) as { archived?: boolean };
            if (list.archived) data.archived = true;
            rows.push({ sourceId: id, data });
          } catch {
            // A malformed row: the engine notes it failed; here it is counted and left out.
          }
        }
        await write(kind, writer, rows);
        if (page.next === undefined) break;
      }
    }
  }

  // Mail, deal by deal, from the deals written above.
  const mailWriter = independentBatch(emailKind, options.tenantId, parents) as BatchWriter<unknown>;
  const deals = [...(records.get("deals")?.keys() ?? [])];
  const concurrency = options.mailConcurrency ?? 4;
  for (let i = 0; i < deals.length; i += concurrency) {
    const group = deals.slice(i, i + concurrency);
    const lists = await Promise.all(group.map((deal) => dealMail(options, deal, pageSize)));
    const rows: WritableRow<unknown>[] = [];
    for (const [k, messages] of lists.entries()) {
      total.rows += messages.length;
      byKind.mail = (byKind.mail ?? 0) + messages.length;
      for (const { raw, body } of messages) {
        const id = sourceId(raw);
        if (id === null) continue;
        try {
          rows.push({ sourceId: id, data: parseEmail(raw, group[k]!, body) });
        } catch {
          // As above.
        }
      }
    }
    await write("mail", mailWriter, rows);
  }
  return { ...total, byKind, seconds: (performance.now() - started) / 1000 };
}

async function getJson(options: PlainCrmImportOptions, path: string, query: Record<string, unknown>) {
  const url = new URL(path, options.sandboxUrl);
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
  const res = await fetch(url, { headers: { "x-api-token": options.apiToken } });
  if (!res.ok) throw new Error(`GET ${url.pathname}${url.search}: ${res.status}`);
  return (await res.json()) as {
    data?: unknown;
    additional_data?: {
      next_cursor?: string | null;
      more_items_in_collection?: boolean;
      pagination?: { more_items_in_collection?: boolean } | null;
    } | null;
  };
}

/** One page of a v2 (cursor) or v1 (offset) list, and where the next one starts (undefined: none). */
async function fetchListPage(
  options: PlainCrmImportOptions,
  list: { api: "v1" | "v2"; path: string; params?: Record<string, string> },
  at: string | number | null,
  limit: number,
): Promise<{ rows: unknown[]; next: string | number | undefined }> {
  if (list.api === "v2") {
    const body = await getJson(options, list.path, { ...list.params, limit, cursor: at ?? undefined });
    const rows = Array.isArray(body.data) ? body.data : [];
    const next = body.additional_data?.next_cursor;
    return { rows, next: typeof next === "string" && next !== "" && next !== at ? next : undefined };
  }
  const start = Number(at);
  const body = await getJson(options, list.path, { ...list.params, start, limit });
  const rows = Array.isArray(body.data) ? body.data : [];
  const pagination = body.additional_data?.pagination ?? body.additional_data;
  return { rows, next: pagination?.more_items_in_collection && rows.length > 0 ? start + limit : undefined };
}

/** A deal's messages with their bodies: from the list when it carries them, else one GET each. */
async function dealMail(
  options: PlainCrmImportOptions,
  deal: string,
  limit: number,
): Promise<{ raw: unknown; body: string | null }[]> {
  const out: { raw: unknown; body: string | null }[] = [];
  for (let start = 0; ; start += limit) {
    const body = await getJson(options, `/v1/deals/${encodeURIComponent(deal)}/mailMessages`, {
      start,
      limit,
      include_body: 1,
    });
    const items = (Array.isArray(body.data) ? body.data : []).map(unwrapMail) as Raw[];
    for (const m of items) {
      const listed = typeof m.body === "string" && m.body !== "" ? m.body : null;
      const hasBody = m.has_body_flag === 1 || m.has_body_flag === true;
      const fetched =
        listed === null && hasBody && !("body" in m)
          ? (((await getJson(options, `/v1/mailbox/mailMessages/${encodeURIComponent(String(m.id))}`, {
              include_body: 1,
            })) as { data?: { body?: unknown } }) ?? {})
          : undefined;
      const got = fetched?.data?.body;
      out.push({ raw: m, body: listed ?? (typeof got === "string" && got !== "" ? got : null) });
    }
    const pagination = body.additional_data?.pagination ?? body.additional_data;
    if (!pagination?.more_items_in_collection || items.length === 0) return out;
  }
}
