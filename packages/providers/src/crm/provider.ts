import {
  type BatchWriter,
  isRowErrorInfo,
  type ParentMap,
  PermanentError,
  type ProductRecords,
  type Provider,
  type RunInfo,
  type SeedContext,
  type SourceRow,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { clientFor } from "./client.js";
import { parseSettings, runSettings, validateBaseUrl } from "./config.js";
import { isSweepCursor, sweepDeletions, sweepSeeds } from "./deletion-sweep.js";
import { sourceId, standInId } from "./fields.js";
import { type ListPage, readListPage } from "./list-walker.js";
import { CATCH_UP, KIND_LISTS, PARENT_ORDER, type SourceList } from "./lists.js";
import { type MailCursor, walkMail } from "./mail.js";
import { redriveMail } from "./mail-redrive.js";
import { type Partition, passCut, runStart, splitList } from "./partitions.js";
import {
  changedSince,
  parentRefs,
  parseActivity,
  parseCompany,
  parseDeal,
  parseLead,
  parseNote,
  parsePerson,
} from "./records.js";
import { crmRedrive, isRedriveCursor, redriveRows } from "./redrive.js";
import { crmVerifier } from "./verifier.js";
import { estimateCrmWork } from "./work-estimate.js";
import {
  activityKind,
  companyKind,
  dealKind,
  type IndependentKind,
  independentBatch,
  leadKind,
  noteKind,
  personBatch,
} from "./writers.js";

/**
 * How a kind's rows are written: all take the batched path (a window in one multi-row insert).
 * Independent kinds plan each row alone; persons are matched by email, window by window.
 */
interface ListKind<T> {
  parse(raw: unknown): T;
  batch(tenantId: string, parents: ParentMap): BatchWriter<T>;
}

const independent =
  <T>(kind: IndependentKind<T>): ListKind<T>["batch"] =>
  (tenantId, parents) =>
    independentBatch(kind, tenantId, parents);

const LIST_KINDS: Record<string, ListKind<never>> = {
  organizations: { parse: parseCompany, batch: independent(companyKind) },
  persons: { parse: parsePerson, batch: personBatch },
  deals: { parse: parseDeal, batch: independent(dealKind) },
  leads: { parse: parseLead, batch: independent(leadKind) },
  activities: { parse: parseActivity, batch: independent(activityKind) },
  notes: { parse: parseNote, batch: independent(noteKind) },
} as unknown as Record<string, ListKind<never>>;

/**
 * Where a list task stands. A v2 list is walked by one chain of tasks per list, or per partition of
 * it, whose successor carries the next opaque cursor (pages cannot be addressed arithmetically); a
 * v1 list by `stripes` tasks, each walking every stripes-th page. A catch-up task (`since` set) asks
 * only for what changed since the run started, and hands over to the next list, then the next kind
 * in `chain`, when its list ends. A split task (`split` set) walks nothing: it seeds the partitions.
 */
export interface ListCursor {
  list: number;
  page: number;
  limit: number;
  cursor?: string | null;
  stripes?: number;
  since?: string;
  chain?: string[];
  /** A follow run's pass (1, 2, …) this catch-up task belongs to; absent for the import's own. */
  pass?: number;
  /** Partitions to split this v2 list into (see partitions.ts). */
  split?: number;
  /** The update_time range this chain walks. */
  partition?: Partition;
}

/** The crm writers' record types, their product tables, and every product column linking them (RevertRun). */
const CRM_PRODUCT_RECORDS: ProductRecords = {
  tables: {
    company: "app.companies",
    contact: "app.contacts",
    deal: "app.deals",
    lead: "app.leads",
    activity: "app.activities",
    note: "app.notes",
    email: "app.emails",
  },
  links: [
    { recordType: "contact", column: "company_id", parent: "company" },
    ...(["deal", "lead"] as const).flatMap((recordType) => [
      { recordType, column: "contact_id", parent: "contact" },
      { recordType, column: "company_id", parent: "company" },
    ]),
    ...(["activity", "note"] as const).flatMap((recordType) => [
      { recordType, column: "deal_id", parent: "deal" },
      { recordType, column: "contact_id", parent: "contact" },
      { recordType, column: "company_id", parent: "company" },
      { recordType, column: "lead_id", parent: "lead" },
    ]),
    { recordType: "email", column: "deal_id", parent: "deal", required: true },
  ],
};

export const crmProvider: Provider = {
  name: "crm",
  phases: [["organizations", "persons"], ["deals", "leads"], ["activities", "notes"], ["mail"], [CATCH_UP]],
  closingKinds: [CATCH_UP],
  deferredLinks: [{ kind: "persons", ref: "organizations", table: "app.contacts", column: "company_id" }],
  verifier: crmVerifier,
  redrive: crmRedrive,
  estimateWork: estimateCrmWork,
  productRecords: CRM_PRODUCT_RECORDS,

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
      if (kind === CATCH_UP) {
        const seed = catchUpSeed(ctx.run, settings.pageSize, ctx.pass);
        if (seed) seeds.push(seed);
        continue;
      }
      const lists = KIND_LISTS[kind] ?? [];
      lists.forEach((list, i) => {
        if (list.api === "v2") {
          const cursor: ListCursor = { list: i, page: 0, limit: settings.pageSize, cursor: null };
          // An archived list is a small fraction of its kind: one chain is enough.
          if (settings.partitions > 1 && !list.archived) {
            const split: ListCursor = { ...cursor, split: settings.partitions };
            seeds.push({ kind, seedKey: `${kind}:${i}:split`, cursor: { ...split } });
            return;
          }
          seeds.push({ kind, seedKey: `${kind}:${i}:page:0`, cursor: { ...cursor } });
          return;
        }
        // An archived list is a small fraction of its kind: one walker is enough.
        const stripes = list.archived ? 1 : settings.stripes;
        for (let stripe = 0; stripe < stripes; stripe++) {
          const cursor: ListCursor = {
            list: i,
            page: stripe,
            stripes,
            limit: settings.pageSize,
          };
          seeds.push({ kind, seedKey: `${kind}:${i}:page:${stripe}`, cursor: { ...cursor } });
        }
      });
    }
    return seeds;
  },

  async runTask(ctx: TaskContext): Promise<TaskResult> {
    if (ctx.task.kind === "mail") return isRedriveCursor(ctx.task.cursor) ? redriveMail(ctx) : walkMail(ctx);
    if (isSweepCursor(ctx.task.cursor)) return sweepDeletions(ctx);
    const kind = LIST_KINDS[ctx.task.kind];
    if (!kind) throw new PermanentError(`crm provider has no kind "${ctx.task.kind}"`);
    if (isRedriveCursor(ctx.task.cursor))
      return redriveRows(ctx, kind.parse, async (rows) => {
        const { settings } = runSettings(ctx.run);
        const writer = async () =>
          kind.batch(ctx.run.tenantId, await ctx.resolveParents(parentsOf(ctx.task.kind, rows)));
        await ctx.writeBatches(rows as never, writer, { windowSize: settings.windowSize });
      });
    return walkList(ctx, kind);
  },
};

/** The run's row kinds, parents first. */
function runKinds(run: RunInfo): string[] {
  const inRun = new Set(run.plan.flat());
  return PARENT_ORDER.filter((k) => inRun.has(k));
}

/**
 * The catch-up pass is one chain of tasks, kind after kind in parent order, so a person added
 * mid-run exists before the deal added with it is linked. It asks for what changed since the run
 * started: the barrier has seen everything before that. A follow run's later passes ask for what
 * changed since the previous pass started, under keys of their own. Deals deleted at the source
 * are in the deals list (status deleted) with the deletion as their update: a pass applies them.
 * Other deletions leave every list: a follow pass's chain ends in a sweep per kind for them
 * (deletion-sweep.ts).
 */
function catchUpSeed(run: RunInfo, limit: number, pass?: SeedContext["pass"]): TaskSeed | undefined {
  const [first, ...chain] = runKinds(run);
  if (!first) return undefined;
  // One cut for every pass (passCut): the start of the second the run or the previous pass began.
  const since = pass ? passCut(pass.since) : runStart(run);
  const cursor: ListCursor = {
    list: 0,
    page: 0,
    limit,
    cursor: null,
    stripes: 1,
    since,
    chain,
    ...(pass ? { pass: pass.index } : {}),
  };
  return { kind: first, seedKey: pageKey(first, cursor), cursor: { ...cursor } };
}

function pageKey(kind: string, c: ListCursor): string {
  const part = c.partition ? `part:${c.partition.index}of${c.partition.of}:` : "";
  const pass = c.pass ? `follow${c.pass}:` : "";
  return `${pass}${c.since ? `${CATCH_UP}:` : ""}${kind}:${c.list}:${part}page:${c.page}`;
}

/**
 * A list task: from its cursor, up to `pagesPerTask` pages of its kind, each fetched, its parents
 * resolved in one query and written in windows. A page that the same task goes on from commits its
 * last window with the cursor moved to the next page (processed offset 0), so a retry or a resume
 * starts at the first page not committed; the last page the task walks hands over to a successor
 * task as before. While a page is written the next one is already being read: the source call and
 * the database work overlap instead of taking turns (the read-ahead spends one call for nothing if
 * the run stops or the task fails on that page; the retry reads it again).
 */
async function walkList(ctx: TaskContext, kind: ListKind<never>): Promise<TaskResult> {
  const first = ctx.task.cursor as unknown as ListCursor;
  const firstList = KIND_LISTS[ctx.task.kind]?.[first.list];
  if (!firstList) throw new PermanentError(`crm provider has no list ${first.list} for "${ctx.task.kind}"`);
  if (first.split)
    return splitList(ctx, firstList, first.split, (partition) => {
      const { split: _, ...chain } = first;
      const next: ListCursor = partition ? { ...chain, partition } : chain;
      return { kind: ctx.task.kind, seedKey: pageKey(ctx.task.kind, next), cursor: { ...next } };
    });
  const { baseUrl, settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);
  // Deals the catch-up lists seed mail tasks, returned when the task ends: a page that seeds some
  // ends its task, so that no committed page's seeds wait on a later page's success.
  const seedsMail =
    first.since !== undefined && ctx.task.kind === "deals" && ctx.run.plan.flat().includes("mail");

  let cursor = first;
  let reading = readPage(client, ctx, cursor);
  for (let walked = 1; ; walked++) {
    const { list, page } = await reading;
    const following = page.more
      ? {
          kind: ctx.task.kind,
          cursor:
            list.api === "v2"
              ? { ...cursor, cursor: page.nextCursor, page: cursor.page + 1 }
              : { ...cursor, page: cursor.page + (cursor.stripes ?? 1) },
        }
      : cursor.since
        ? nextCatchUp(ctx.task.kind, cursor)
        : undefined;
    // The next page is this task's too when it is of the same kind and the task has pages left.
    const onward =
      following && following.kind === ctx.task.kind && walked < settings.pagesPerTask
        ? following.cursor
        : undefined;
    if (onward && !seedsMail) reading = readPage(client, ctx, onward);

    const rows = parsePage(ctx.task.kind, cursor, list, page.rows, kind);
    const mail = seedsMail ? mailAfter(cursor, rows) : undefined;
    const goOn = onward && !mail ? onward : undefined;
    // Parents are resolved, in one query, only when a window writes, and only for the rows it may
    // write: a page the ledger holds whole needs none, a re-run's page few.
    const writer = async (toWrite: readonly SourceRow<unknown>[]) =>
      kind.batch(ctx.run.tenantId, await ctx.resolveParents(parentsOf(ctx.task.kind, toWrite)));
    await ctx.writeBatches(rows as never, writer, {
      windowSize: settings.windowSize,
      // The catch-up lists only what changed since the run started: a row the ledger already holds
      // is applied to its record (as ownership allows), not created again. Any other pass, a re-run
      // of an imported tenant among them, writes nothing for a held row.
      ...(cursor.since ? { reapply: () => true } : {}),
      // Committed with the page's last window: the task has moved on to the next page.
      ...(goOn ? { nextCursor: { ...goOn } } : {}),
    });
    ctx.working();
    if (goOn) {
      cursor = goOn;
      if (seedsMail) reading = readPage(client, ctx, cursor);
      continue;
    }
    const successors: TaskSeed[] = [];
    if (following)
      successors.push({
        kind: following.kind,
        seedKey: pageKey(following.kind, following.cursor),
        cursor: { ...following.cursor },
      });
    if (mail) successors.push(mail);
    // A follow pass's chain has walked its last list: the sweeps for deletions no list reports.
    if (!following && cursor.since && cursor.pass) successors.push(...sweepSeeds(ctx.run, cursor.pass));
    return { successors };
  }
}

/** The parents a page's rows name, by kind. */
function parentsOf(kind: string, rows: readonly SourceRow<unknown>[]): Record<string, string[]> {
  const wanted: Record<string, string[]> = {};
  for (const row of rows) {
    if (isRowErrorInfo(row.data)) continue;
    for (const [parentKind, id] of Object.entries(parentRefs(kind, row.data))) {
      if (!id) continue;
      wanted[parentKind] ??= [];
      wanted[parentKind].push(id);
    }
  }
  return wanted;
}

/** The list and its page at `cursor`; a read that is not awaited yet cannot go unhandled. */
function readPage(
  client: ReturnType<typeof clientFor>,
  ctx: TaskContext,
  cursor: ListCursor,
): Promise<{ list: SourceList; page: ListPage }> {
  const list = KIND_LISTS[ctx.task.kind]?.[cursor.list];
  if (!list)
    return Promise.reject(
      new PermanentError(`crm provider has no list ${cursor.list} for "${ctx.task.kind}"`),
    );
  // A partition's range is its own updated_since (v2 only); a catch-up asks for what changed where
  // the list can filter by it.
  const filters =
    list.api === "v2" && cursor.partition
      ? { updated_since: cursor.partition.since, updated_until: cursor.partition.until }
      : cursor.since && (list.api === "v2" || list.updatedSince)
        ? { updated_since: cursor.since }
        : {};
  const reading = readListPage(
    client,
    list,
    list.api === "v2" ? { cursor: cursor.cursor ?? null } : { start: cursor.page * cursor.limit },
    cursor.limit,
    { filters, signal: ctx.signal },
  ).then((page) => ({ list, page }));
  reading.catch(() => {});
  return reading;
}

/** A page's rows as the writers take them: parsed, or a row error naming what is wrong. */
function parsePage(
  kindName: string,
  cursor: ListCursor,
  list: SourceList,
  raws: unknown[],
  kind: ListKind<never>,
): SourceRow<unknown>[] {
  // A v1 list without updated_since (archived leads) is walked whole by the catch-up, which keeps
  // what changed; where the source filtered, the same test keeps every row it sent.
  const kept =
    cursor.since && list.api === "v1" ? raws.filter((raw) => changedSince(raw, cursor.since!)) : raws;
  return kept.map((raw) => {
    const id = sourceId(raw);
    if (id === null)
      return {
        sourceId: standInId(kindName, cursor.list, raw),
        data: { rowError: "the row has no usable id" },
      };
    try {
      const data = kind.parse(raw) as { archived?: boolean };
      if (list.archived) data.archived = true;
      return { sourceId: id, data };
    } catch (err) {
      return { sourceId: id, data: { rowError: (err as Error).message } };
    }
  });
}

/**
 * Deals changed or added mid-run may carry mail the mail phase never listed: the catch-up's page of
 * deals seeds a mail task for them. Only messages new to the ledger, or changed since the run
 * started, get their body (mail.ts).
 */
function mailAfter(cursor: ListCursor, rows: readonly SourceRow<unknown>[]): TaskSeed | undefined {
  const deals = rows.filter((r) => !isRowErrorInfo(r.data)).map((r) => r.sourceId);
  if (deals.length === 0 || !cursor.since) return undefined;
  const mail: MailCursor = { deals, index: 0, since: cursor.since };
  return { kind: "mail", seedKey: `mail:${pageKey("deals", cursor)}`, cursor: { ...mail } };
}

/** Where the catch-up chain goes once a list is exhausted: the kind's next list, else the next kind. */
function nextCatchUp(kind: string, c: ListCursor): { kind: string; cursor: ListCursor } | undefined {
  const base = {
    page: 0,
    limit: c.limit,
    cursor: null,
    stripes: 1,
    since: c.since!,
    ...(c.pass ? { pass: c.pass } : {}),
  };
  if (c.list + 1 < (KIND_LISTS[kind]?.length ?? 0))
    return { kind, cursor: { ...base, list: c.list + 1, chain: c.chain ?? [] } };
  const [nextKind, ...chain] = c.chain ?? [];
  return nextKind ? { kind: nextKind, cursor: { ...base, list: 0, chain } } : undefined;
}

/**
 * Mail is listed per deal, so its tasks are seeded from the deals the ledger knows — ten per task,
 * checkpointed by deal index so a retry or a resume keeps its meaning. Deals this run failed to
 * import are walked too: their messages cannot be linked, and are skipped as such rather than
 * never seen, so every message of the account is accounted for.
 */
async function seedMail(ctx: SeedContext, perTask: number): Promise<TaskSeed[]> {
  // A dry run's deals are in the ledger only as it would have written them (its windows were
  // rolled back): its mail walks the deals a real run would hold by now.
  const rows = await ctx.tx.execute<{ source_id: string }>(sql`
    select source_id from drover.ledger
     where tenant_id = ${ctx.run.tenantId} and source = ${ctx.run.source} and source_account = ${ctx.run.sourceAccount}
       and kind = 'deals' and action in ('created', 'matched')
    union
    select source_id from drover.dry_run_rows
     where ${ctx.run.dryRun ? 1 : 0}::int = 1 and run_id = ${ctx.run.id}::uuid and kind = 'deals'
    union
    select subject_id from drover.notes
     where run_id = ${ctx.run.id}::uuid and kind = 'deals' and level = 'error' and subject_id is not null
    order by 1`);
  const ids = rows
    .map((r) => r.source_id)
    .sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  if (!ctx.run.plan.flat().includes("deals")) await noteDealsNotInRun(ctx, ids.length);
  const seeds: TaskSeed[] = [];
  for (let i = 0; i < ids.length; i += perTask) {
    const deals = ids.slice(i, i + perTask);
    seeds.push({ kind: "mail", seedKey: `mail:${deals[0]}:${deals.length}`, cursor: { deals, index: 0 } });
  }
  return seeds;
}

/**
 * Mail is listed per deal, and only deals the ledger holds can be walked: a run that does not
 * import deals says what that left out, rather than succeed with no mail and no word (the source
 * is not asked here, so the deals it lacks are named as a kind, not one by one).
 */
async function noteDealsNotInRun(ctx: SeedContext, dealsInLedger: number): Promise<void> {
  const fix = "import deals first, or in the same run (kinds deals,mail)";
  const [level, reason] =
    dealsInLedger === 0
      ? [
          "warn",
          `mail is listed per deal, and no deal of this tenant and account is in the ledger, so no message was read; ${fix}`,
        ]
      : [
          "info",
          `mail was listed for the ${dealsInLedger} deal(s) already in the ledger only: deals not imported yet were not read; ${fix}`,
        ];
  // A resumed run may seed its mail phase again: one note says it.
  await ctx.tx.execute(sql`
    insert into drover.notes (run_id, level, kind, subject_id, reason)
    select ${ctx.run.id}::uuid, ${level}, 'mail', null, ${reason}
     where not exists (select 1 from drover.notes
                        where run_id = ${ctx.run.id}::uuid and kind = 'mail' and subject_id is null and reason = ${reason})`);
}
