import { randomUUID } from "node:crypto";
import type { Database } from "@drover/db";

/**
 * The yardstick of write_efficiency: what a plain script does to land the same source rows in the
 * same destination tables (app.companies, app.contacts) and the same ledger rows (drover.ledger,
 * keyed on tenant/source/account/kind/source_id) — without savepoints, checkpoints, tasks or
 * queues. One transaction per 25-row window, holding two or three multi-row statements: the
 * destination insert (returning ids), the ledger upsert (the engine's ON CONFLICT rule), and for
 * persons one lookup of already-known emails. It reads the sandbox page by page (500 rows), the
 * next page fetched while the current one is written; organizations first, so persons find their
 * company in the ledger with one query per page instead of a deferred link.
 */

type Sql = Database["sql"];
/** What sql.begin hands its callback (the last overload of begin is `(options, callback)`). */
type Tx = Parameters<Parameters<Sql["begin"]>[1]>[0];

export interface PlainWriteOptions {
  sandboxUrl: string;
  apiToken: string;
  tenantId: string;
  source: string;
  sourceAccount: string;
  pageSize?: number;
  windowSize?: number;
}

export interface PlainWriteResult {
  rows: number;
  created: number;
  matched: number;
  seconds: number;
}

type Raw = Record<string, unknown>;

export async function plainWrite(sql: Sql, options: PlainWriteOptions): Promise<PlainWriteResult> {
  const pageSize = options.pageSize ?? 500;
  const windowSize = options.windowSize ?? 25;
  const runId = randomUUID();
  const scope = {
    tenant_id: options.tenantId,
    source: options.source,
    source_account: options.sourceAccount,
    run_id: runId,
  };
  const total = { rows: 0, created: 0, matched: 0 };
  const started = performance.now();

  for (const kind of ["organizations", "persons"] as const) {
    let next = fetchPage(options, kind, 0, pageSize);
    for (let start = 0; ; start += pageSize) {
      const page = await next;
      if (page.more) next = fetchPage(options, kind, start + pageSize, pageSize);
      const companies =
        kind === "persons"
          ? await companyIds(
              sql,
              scope,
              page.items.map((r) => ref(r.org_id)),
            )
          : undefined;
      for (let i = 0; i < page.items.length; i += windowSize) {
        const window = page.items.slice(i, i + windowSize);
        const counts =
          kind === "organizations"
            ? await writeCompanies(sql, scope, window)
            : await writeContacts(sql, scope, window, companies!);
        total.rows += window.length;
        total.created += counts.created;
        total.matched += counts.matched;
      }
      if (!page.more) break;
    }
  }
  return { ...total, seconds: (performance.now() - started) / 1000 };
}

interface Scope {
  tenant_id: string;
  source: string;
  source_account: string;
  run_id: string;
}

interface LedgerRow {
  kind: string;
  source_id: string;
  action: "created" | "matched";
  record_type: string;
  record_id: number;
}

const LEDGER_COLUMNS = [
  "tenant_id",
  "source",
  "source_account",
  "kind",
  "source_id",
  "action",
  "record_type",
  "record_id",
  "run_id",
] as const;

/** The engine's claim, 25 rows at a time: a created/matched slot is exclusive, a skipped one is taken over. */
async function claim(tx: Tx, scope: Scope, rows: LedgerRow[]): Promise<Set<string>> {
  const won = await tx<{ source_id: string }[]>`
    insert into drover.ledger ${tx(
      rows.map((r) => ({ ...scope, ...r })),
      ...LEDGER_COLUMNS,
    )}
    on conflict (tenant_id, source, source_account, kind, source_id) do update set
      action = excluded.action, record_type = excluded.record_type, record_id = excluded.record_id,
      reason = excluded.reason, pending_refs = excluded.pending_refs, run_id = excluded.run_id,
      task_id = excluded.task_id, updated_at = now()
    where drover.ledger.action = 'skipped'
    returning source_id`;
  return new Set(won.map((r) => r.source_id));
}

async function writeCompanies(sql: Sql, scope: Scope, window: Raw[]) {
  return sql.begin(async (tx) => {
    const values = window.map((r) => ({
      tenant_id: scope.tenant_id,
      name: String(r.name),
      address: text(r.address),
      custom_fields: customFields(r),
    }));
    const ids = await tx<{ id: string }[]>`
      insert into app.companies ${tx(values as never, "tenant_id", "name", "address", "custom_fields")} returning id`;
    const rows: LedgerRow[] = window.map((r, i) => ({
      kind: "organizations",
      source_id: String(r.id),
      action: "created",
      record_type: "company",
      record_id: Number(ids[i]!.id),
    }));
    const won = await claim(tx, scope, rows);
    const lost = rows.filter((r) => !won.has(r.source_id)).map((r) => r.record_id);
    if (lost.length > 0) await tx`delete from app.companies where id = any(${lost})`;
    return { created: won.size, matched: 0 };
  });
}

async function writeContacts(sql: Sql, scope: Scope, window: Raw[], companies: Map<string, number>) {
  return sql.begin(async (tx) => {
    const people = window.map((r) => ({ r, email: email(r) }));
    const emails = [...new Set(people.map((p) => p.email?.toLowerCase()).filter((e): e is string => !!e))];
    const known = new Map<string, number>();
    if (emails.length > 0) {
      const found = await tx<{ email: string; id: string }[]>`
        select lower(email) as email, min(id)::text as id from app.contacts
         where tenant_id = ${scope.tenant_id} and lower(email) = any(${emails}) group by 1`;
      for (const f of found) known.set(f.email, Number(f.id));
    }
    // As the engine writes row by row, a later row with an email met earlier in the window matches it.
    const toInsert: { index: number; key: string | undefined }[] = [];
    const firstInWindow = new Map<string, number>();
    const matchedTo = new Map<number, string>();
    people.forEach((p, index) => {
      const key = p.email?.toLowerCase();
      if (key && known.has(key)) matchedTo.set(index, key);
      else if (key && firstInWindow.has(key)) matchedTo.set(index, key);
      else {
        if (key) firstInWindow.set(key, index);
        toInsert.push({ index, key });
      }
    });
    const inserted = new Map<number, number>();
    if (toInsert.length > 0) {
      const values = toInsert.map(({ index }) => {
        const { r, email } = people[index]!;
        return {
          tenant_id: scope.tenant_id,
          name: String(r.name),
          email,
          phone: primary(r.phone),
          company_id: companies.get(ref(r.org_id) ?? "") ?? null,
          custom_fields: customFields(r),
        };
      });
      const ids = await tx<{ id: string }[]>`
        insert into app.contacts ${tx(values as never, "tenant_id", "name", "email", "phone", "company_id", "custom_fields")}
        returning id`;
      toInsert.forEach(({ index, key }, i) => {
        inserted.set(index, Number(ids[i]!.id));
        if (key) known.set(key, Number(ids[i]!.id));
      });
    }
    const rows: LedgerRow[] = people.map((p, index) => {
      const matched = matchedTo.get(index);
      return {
        kind: "persons",
        source_id: String(p.r.id),
        action: matched === undefined ? "created" : "matched",
        record_type: "contact",
        record_id: matched === undefined ? inserted.get(index)! : known.get(matched)!,
      };
    });
    const won = await claim(tx, scope, rows);
    const lost = rows.filter((r) => !won.has(r.source_id) && r.action === "created").map((r) => r.record_id);
    if (lost.length > 0) await tx`delete from app.contacts where id = any(${lost})`;
    const created = rows.filter((r) => won.has(r.source_id) && r.action === "created").length;
    return { created, matched: won.size - created };
  });
}

/** The ledger's record ids of a page's organizations: one query per page, as the engine resolves parents. */
async function companyIds(sql: Sql, scope: Scope, refs: (string | null)[]): Promise<Map<string, number>> {
  const ids = [...new Set(refs.filter((r): r is string => r !== null))];
  if (ids.length === 0) return new Map();
  const rows = await sql<{ source_id: string; record_id: string }[]>`
    select source_id, record_id::text as record_id from drover.ledger
     where tenant_id = ${scope.tenant_id} and source = ${scope.source} and source_account = ${scope.source_account}
       and kind = 'organizations' and action in ('created', 'matched') and source_id = any(${ids})`;
  return new Map(rows.map((r) => [r.source_id, Number(r.record_id)]));
}

async function fetchPage(
  options: PlainWriteOptions,
  kind: string,
  start: number,
  limit: number,
): Promise<{ items: Raw[]; more: boolean }> {
  const res = await fetch(`${options.sandboxUrl}/v1/${kind}?start=${start}&limit=${limit}`, {
    headers: { "x-api-token": options.apiToken },
  });
  if (!res.ok) throw new Error(`GET /v1/${kind}?start=${start}: ${res.status}`);
  const body = (await res.json()) as {
    data: Raw[] | null;
    additional_data?: { pagination?: { more_items_in_collection?: boolean } };
  };
  const items = body.data ?? [];
  return {
    items,
    more: body.additional_data?.pagination?.more_items_in_collection === true && items.length > 0,
  };
}

function text(v: unknown): string | null {
  return typeof v === "string" && v !== "" ? v : null;
}

function ref(v: unknown): string | null {
  if (typeof v === "object" && v !== null) v = (v as Raw).value;
  return typeof v === "number" && v > 0 ? String(v) : typeof v === "string" && v !== "" ? v : null;
}

/** The primary (or first non-empty) value of a v1 `[{value, primary}]` list. */
function primary(v: unknown): string | null {
  if (typeof v === "string") return text(v.trim());
  if (!Array.isArray(v)) return null;
  const entries = v.filter((e): e is Raw => typeof e === "object" && e !== null && text(e.value) !== null);
  const pick = entries.find((e) => e.primary === true) ?? entries[0];
  return pick ? text(String(pick.value).trim()) : null;
}

function email(r: Raw): string | null {
  return primary(r.email) ?? primary(r.emails);
}

/** v1 custom fields (40-hex keys at the root), as jsonb text: postgres.js sends it as the server's jsonb input. */
function customFields(r: Raw): string | null {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r)) if (/^[0-9a-f]{40}$/.test(k) && v !== null) out[k] = v;
  return Object.keys(out).length > 0 ? JSON.stringify(out) : null;
}
