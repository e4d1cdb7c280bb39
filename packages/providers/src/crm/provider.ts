import type { Tx } from "@drover/db";
import {
  isRowErrorInfo,
  type ParentMap,
  type Provider,
  type RowResult,
  type SeedContext,
  type SourceRow,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { clientFor } from "./client.js";
import { parseSettings, runSettings, validateBaseUrl } from "./config.js";
import { sourceId } from "./fields.js";
import { walkMail } from "./mail.js";
import {
  parentRefs,
  parseActivity,
  parseCompany,
  parseDeal,
  parseLead,
  parseNote,
  parsePerson,
} from "./records.js";
import { crmVerifier } from "./verify.js";
import { writeActivity, writeCompany, writeDeal, writeLead, writeNote, writePerson } from "./writers.js";

interface ListKind<T> {
  path: string;
  params?: Record<string, string>;
  parse(raw: unknown): T;
  write(tx: Tx, tenantId: string, row: T, parents: ParentMap): Promise<RowResult>;
}

/** Kinds read from v1 offset lists: pages are addressable, so a kind can be striped. */
const LIST_KINDS: Record<string, ListKind<never>> = {
  organizations: {
    path: "/v1/organizations",
    parse: parseCompany,
    write: (tx: Tx, t: string, r: never) => writeCompany(tx, t, r),
  },
  persons: { path: "/v1/persons", parse: parsePerson, write: writePerson },
  deals: { path: "/v1/deals", parse: parseDeal, write: writeDeal },
  leads: { path: "/v1/leads", parse: parseLead, write: writeLead },
  // Without user_id=0 Pipedrive returns only the token owner's activities: a silent partial import.
  activities: {
    path: "/v1/activities",
    params: { user_id: "0" },
    parse: parseActivity,
    write: writeActivity,
  },
  notes: { path: "/v1/notes", parse: parseNote, write: writeNote },
} as unknown as Record<string, ListKind<never>>;

interface PageCursor {
  page: number;
  stripes: number;
  limit: number;
}

interface V1Envelope {
  success?: boolean;
  data?: unknown[] | null;
  additional_data?: { pagination?: { more_items_in_collection?: boolean } } | null;
}

export const crmProvider: Provider = {
  name: "crm",
  phases: [["organizations", "persons"], ["deals", "leads"], ["activities", "notes"], ["mail"]],
  deferredLinks: [{ kind: "persons", ref: "organizations", table: "app.contacts", column: "company_id" }],
  verifier: crmVerifier,

  validateConfig({ baseUrl, apiToken, settings }) {
    const urlProblem = validateBaseUrl(baseUrl);
    if (urlProblem) return urlProblem;
    if (!apiToken.trim()) return "api_token is required: the Pipedrive API token of the account to import";
    const parsed = parseSettings(settings);
    return typeof parsed === "string" ? parsed : undefined;
  },

  async seedPhase(ctx: SeedContext): Promise<TaskSeed[]> {
    const { settings } = runSettings(ctx.run);
    const seeds: TaskSeed[] = [];
    for (const kind of ctx.kinds) {
      if (kind === "mail") {
        seeds.push(...(await seedMail(ctx, settings.dealsPerMailTask)));
        continue;
      }
      for (let stripe = 0; stripe < settings.stripes; stripe++) {
        const cursor: PageCursor = { page: stripe, stripes: settings.stripes, limit: settings.pageSize };
        seeds.push({ kind, seedKey: `${kind}:page:${stripe}`, cursor: { ...cursor } });
      }
    }
    return seeds;
  },

  async runTask(ctx: TaskContext): Promise<TaskResult> {
    if (ctx.task.kind === "mail") return walkMail(ctx);
    const kind = LIST_KINDS[ctx.task.kind];
    if (!kind) throw new Error(`crm provider has no kind "${ctx.task.kind}"`);
    return walkPage(ctx, kind);
  },
};

/** One page of a stripe: fetch, resolve parents in one query, write in windows, seed the stripe's next page. */
async function walkPage(ctx: TaskContext, kind: ListKind<never>): Promise<TaskResult> {
  const cursor = ctx.task.cursor as unknown as PageCursor;
  const { baseUrl } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);
  const start = cursor.page * cursor.limit;
  const body = await client.getJson<V1Envelope>(
    kind.path,
    { ...kind.params, start, limit: cursor.limit },
    "list",
    ctx.signal,
  );
  // An empty v1 collection may come back as data: null, with or without additional_data.
  const items = Array.isArray(body?.data) ? body.data : [];

  const rows: SourceRow<unknown>[] = items.map((raw, i) => {
    const id = sourceId(raw);
    if (id === null)
      return { sourceId: `${ctx.task.kind}@${start + i}`, data: { rowError: "the row has no usable id" } };
    try {
      return { sourceId: id, data: kind.parse(raw) };
    } catch (err) {
      return { sourceId: id, data: { rowError: (err as Error).message } };
    }
  });

  const wanted: Record<string, string[]> = {};
  for (const row of rows) {
    if (isRowErrorInfo(row.data)) continue;
    for (const [parentKind, id] of Object.entries(parentRefs(ctx.task.kind, row.data))) {
      if (!id) continue;
      wanted[parentKind] ??= [];
      wanted[parentKind].push(id);
    }
  }
  const parents = await ctx.resolveParents(wanted);
  const tenantId = ctx.run.tenantId;
  await ctx.writeRows(rows, (tx, row) => kind.write(tx, tenantId, row as never, parents));

  const more = body?.additional_data?.pagination?.more_items_in_collection === true;
  if (!more || items.length === 0) return {};
  const next: PageCursor = { ...cursor, page: cursor.page + cursor.stripes };
  return {
    successors: [{ kind: ctx.task.kind, seedKey: `${ctx.task.kind}:page:${next.page}`, cursor: { ...next } }],
  };
}

/**
 * Mail is listed per deal, so its tasks are seeded from the deals the ledger knows — ten per task,
 * checkpointed by deal index so a retry or a resume keeps its meaning. Deals this run failed to
 * import are walked too: their messages cannot be linked, and are skipped as such rather than
 * never seen, so every message of the account is accounted for.
 */
async function seedMail(ctx: SeedContext, perTask: number): Promise<TaskSeed[]> {
  const rows = await ctx.tx.execute<{ source_id: string }>(sql`
    select source_id from drover.ledger
     where tenant_id = ${ctx.run.tenantId} and source = ${ctx.run.source} and source_account = ${ctx.run.sourceAccount}
       and kind = 'deals' and action in ('created', 'matched')
    union
    select subject_id from drover.notes
     where run_id = ${ctx.run.id}::uuid and kind = 'deals' and level = 'error' and subject_id is not null
    order by 1`);
  const ids = rows
    .map((r) => r.source_id)
    .sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  const seeds: TaskSeed[] = [];
  for (let i = 0; i < ids.length; i += perTask) {
    const deals = ids.slice(i, i + perTask);
    seeds.push({ kind: "mail", seedKey: `mail:${deals[0]}:${deals.length}`, cursor: { deals, index: 0 } });
  }
  return seeds;
}
