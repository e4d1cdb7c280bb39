import { PRODUCT_RECORDS } from "@drover/product-records";
import {
  type BatchWriter,
  isRowErrorInfo,
  isSweepCursor,
  type ParentMap,
  PermanentError,
  type Provider,
  type RunInfo,
  type SeedContext,
  type SourceRow,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { parseSettings, runSettings, validateBaseUrl } from "./config.js";
import { dailyResetTimeZone } from "./daily-reset.js";
import { sweepDeletions, sweepSeedsOf } from "./deletion-sweep.js";
import { sourceId, standInId } from "./fields.js";
import { applyEvents, isEventCursor } from "./follow-events.js";
import { type ListPage, readListPage } from "./list-walker.js";
import { CATCH_UP, KIND_LISTS, PARENT_ORDER, type SourceList } from "./lists.js";
import { walkMail } from "./mail.js";
import {
  grownSince,
  listedCounts,
  MAIL_COUNT_FIELD,
  MAIL_COUNTS_REFUSED_FACT,
  type MailDeals,
  mailDealsOf,
  mailSeeds,
} from "./mail-counts.js";
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
import { crmWebhooks } from "./webhooks.js";
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
 * v1 list by one task that widens to `widen` stripes, each walking every stripes-th page. A catch-up task (`since` set) asks
 * only for what changed since the run started, and hands over to the next list, then the next kind
 * in `chain`, when its list ends. A split task (`split` set) walks nothing: it seeds the partitions.
 */
export interface ListCursor {
  list: number;
  page: number;
  limit: number;
  cursor?: string | null;
  stripes?: number;
  /** The stripes this v1 walk widens to once two pages came back full (nextV1Pages). */
  widen?: number;
  since?: string;
  chain?: string[];
  /** A follow run's pass (1, 2, …) this catch-up task belongs to; absent for the import's own. */
  pass?: number;
  /** Partitions to split this v2 list into (see partitions.ts). */
  split?: number;
  /** The update_time range this chain walks. */
  partition?: Partition;
  /** false once the account refused the deal list's include_fields: its pages no longer ask. */
  counts?: false;
  /** The deals of the task's last page whose mail the mail phase lists (mail-counts.ts). */
  mail?: MailDeals;
}

export const crmProvider: Provider = {
  name: "crm",
  phases: [["organizations", "persons"], ["deals", "leads"], ["activities", "notes"], ["mail"], [CATCH_UP]],
  closingKinds: [CATCH_UP],
  deferredLinks: [{ kind: "persons", ref: "organizations", table: "app.contacts", column: "company_id" }],
  verifier: crmVerifier,
  redrive: crmRedrive,
  webhooks: crmWebhooks,
  estimateWork: estimateCrmWork,
  dailyResetTimeZone,
  productRecords: PRODUCT_RECORDS,

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
        // One walker, which widens as the list shows it goes on (nextV1Pages). An archived list is a
        // small fraction of its kind: it stays one walker.
        const widen = list.archived ? 1 : Math.min(settings.stripes, MAX_V1_STRIPES);
        const cursor: ListCursor = {
          list: i,
          page: 0,
          stripes: 1,
          limit: settings.pageSize,
          ...(widen > 1 ? { widen } : {}),
        };
        seeds.push({ kind, seedKey: `${kind}:${i}:page:0`, cursor: { ...cursor } });
      });
    }
    return seeds;
  },

  async runTask(ctx: TaskContext): Promise<TaskResult> {
    if (ctx.task.kind === "mail") return isRedriveCursor(ctx.task.cursor) ? redriveMail(ctx) : walkMail(ctx);
    if (isSweepCursor(ctx.task.cursor)) return sweepDeletions(ctx);
    const kind = LIST_KINDS[ctx.task.kind];
    if (!kind) throw new PermanentError(`crm provider has no kind "${ctx.task.kind}"`);
    if (isEventCursor(ctx.task.cursor))
      return applyEvents(ctx, kind.parse, async (rows) => {
        const { settings } = runSettings(ctx.run);
        const writer = async () =>
          kind.batch(ctx.run.tenantId, await ctx.resolveParents(parentsOf(ctx.task.kind, rows)));
        // As a catch-up writes: a held row is applied to its record as ownership allows.
        await ctx.writeBatches(rows as never, writer, {
          windowSize: settings.windowSize,
          reapply: () => true,
        });
      });
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
 * The tasks a list task hands over to when its walk ends: the next page (or the catch-up's next
 * list), the stripes a widened v1 walk splits into, a catch-up page's mail tasks, and at the end of
 * a follow pass's chain the sweeps for deletions no list reports.
 */
function successorsOf(
  ctx: TaskContext,
  cursor: ListCursor,
  following: { kind: string; cursor: ListCursor } | undefined,
  wider: readonly ListCursor[],
  mail: MailDeals | undefined,
  dealsPerMailTask: number,
): TaskSeed[] {
  const successors: TaskSeed[] = [];
  if (following)
    successors.push({
      kind: following.kind,
      seedKey: pageKey(following.kind, following.cursor),
      cursor: { ...following.cursor },
    });
  for (const stripe of wider)
    successors.push({ kind: ctx.task.kind, seedKey: pageKey(ctx.task.kind, stripe), cursor: { ...stripe } });
  if (mail && cursor.since)
    successors.push(...mailSeeds(mail, dealsPerMailTask, `${pageKey(ctx.task.kind, cursor)}:`, cursor.since));
  if (!following && cursor.since && cursor.pass) successors.push(...sweepSeedsOf(ctx.run, cursor.pass));
  return successors;
}

/**
 * A list task: from its cursor, up to `pagesPerTask` pages of its kind, each fetched, its parents
 * resolved in one query and written in windows. A page that the same task goes on from commits its
 * last window with the cursor moved to the next page (processed offset 0), so a retry or a resume
 * starts at the first page not committed; the last page the task walks hands over to a successor
 * task as before. While a page is written the next one is already being read: the source call and
 * the database work overlap instead of taking turns (the read-ahead spends one call for nothing if
 * the run stops or the task fails on that page; the retry reads it again). One function because
 * the read-ahead, the page's mail deals and where the walk goes next share the loop's state.
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
  // A page of deals finds which of its deals have mail (mail-counts.ts): the catch-up's page seeds
  // their mail tasks, the import's keeps them in its cursor for the mail phase. Either way a page
  // with such deals ends its task, so that no committed page's deals wait on a later page's success.
  const seedsMail = ctx.task.kind === "deals" && ctx.run.plan.flat().includes("mail");

  // Once a page found the account refusing the counts, no task of the run asks for them again.
  const refused =
    seedsMail && first.counts !== false && (await ctx.runFact(MAIL_COUNTS_REFUSED_FACT)) === true;
  let cursor: ListCursor = refused ? { ...first, counts: false } : first;
  let listed: ReturnType<typeof listedCounts> | undefined;
  let reading = readPage(client, ctx, cursor, seedsMail);
  for (let walked = 1; ; walked++) {
    const { list, page, countsAsked } = await reading;
    if (seedsMail && !countsAsked) cursor = { ...cursor, counts: false };
    const [ahead, ...widened] =
      list.api === "v2"
        ? [{ ...cursor, cursor: page.nextCursor, page: cursor.page + 1 }]
        : nextV1Pages(cursor);
    const following = page.more
      ? { kind: ctx.task.kind, cursor: ahead! }
      : cursor.since
        ? nextCatchUp(ctx.task.kind, cursor)
        : undefined;
    // The next page is this task's too when it is of the same kind and the task has pages left.
    // A walk that widens hands both its stripes over to tasks of their own.
    const wider = page.more ? widened : [];
    const onward =
      following && following.kind === ctx.task.kind && walked < settings.pagesPerTask && wider.length === 0
        ? following.cursor
        : undefined;
    if (onward && !seedsMail) reading = readPage(client, ctx, onward, seedsMail);

    const rows = parsePage(ctx.task.kind, cursor, list, page.rows, kind);
    const found = seedsMail ? await mailDealsOf(ctx, page.rows, countsAsked === true) : undefined;
    // A catch-up lists again only the mail of deals whose count grew since it was listed.
    if (found && cursor.since) listed ??= listedCounts(ctx);
    const mail = found && listed ? grownSince(found, await listed) : found;
    const goOn = onward && !mail?.deals.length ? onward : undefined;
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
      if (seedsMail) reading = readPage(client, ctx, cursor, seedsMail);
      continue;
    }
    // The import keeps a page's deals with mail for the mail phase; a catch-up seeds their tasks.
    if (mail && !cursor.since) await ctx.keepCursor({ ...cursor, mail });
    return { successors: successorsOf(ctx, cursor, following, wider, mail, settings.dealsPerMailTask) };
  }
}

/**
 * A v1 list is addressed by offset, so its pages can be read side by side; but Pipedrive does not
 * say how long a list is, only whether a page has a next one, so every page read ahead is a bet
 * that costs a whole page (20 tokens) when it comes back empty. The walk starts as one walker and
 * widens to MAX_V1_STRIPES once two pages came back full: the list then has shown it is long,
 * and where it ends at most one walker reads one empty page. A list of one or two pages (most
 * accounts' leads and notes) pays no empty page.
 */
export const MAX_V1_STRIPES = 2;

/** The pages a v1 walk reads after the page at `c`, which says the list goes on: the first is its own. */
export function nextV1Pages(c: ListCursor): ListCursor[] {
  const stripes = c.stripes ?? 1;
  const widen = c.widen ?? 1;
  if (stripes === 1 && widen > 1 && c.page >= 1) {
    const { widen: _, ...walk } = c;
    return Array.from({ length: widen }, (_, d) => ({ ...walk, page: c.page + 1 + d, stripes: widen }));
  }
  return [{ ...c, page: c.page + stripes }];
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

/**
 * The list and its page at `cursor`; a read that is not awaited yet cannot go unhandled. A deal
 * list read for a run that imports mail asks for each deal's message count (`countsAsked`); an
 * account that refuses the parameter is asked again without it, and the run remembers.
 */
function readPage(
  client: ReturnType<typeof clientFor>,
  ctx: TaskContext,
  cursor: ListCursor,
  mailInRun = false,
): Promise<{ list: SourceList; page: ListPage; countsAsked?: boolean }> {
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
  const at = list.api === "v2" ? { cursor: cursor.cursor ?? null } : { start: cursor.page * cursor.limit };
  const read = (asked: boolean) =>
    readListPage(client, list, at, cursor.limit, {
      filters: asked ? { ...filters, include_fields: MAIL_COUNT_FIELD } : filters,
      signal: ctx.signal,
    }).then((page) => ({ list, page, countsAsked: asked }));
  const ask = mailInRun && list.mailCounts === true && cursor.counts !== false;
  const reading = !ask
    ? read(false)
    : read(true).catch(async (err) => {
        // A refusal of the parameter (a 4xx) would refuse every page: the page is read without it.
        if (!(err instanceof PermanentError)) throw err;
        const page = await read(false);
        await ctx.settleRunFact(MAIL_COUNTS_REFUSED_FACT, true);
        return page;
      });
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
 * The deals whose mail the run's pages of deals found to list (ListCursor.mail), in the order the
 * mail phase walks deals; undefined when no page kept any (a run begun before pages kept them).
 */
async function countedMailDeals(ctx: SeedContext): Promise<MailDeals | undefined> {
  const rows = (await ctx.keptCursors("deals", "mail")) as { mail: MailDeals }[];
  if (rows.length === 0) return undefined;
  const pairs = new Map<string, number | null>();
  for (const { mail } of rows)
    for (const [i, deal] of mail.deals.entries()) pairs.set(deal, mail.expected[i] ?? null);
  const deals = [...pairs.keys()].sort(bySourceId);
  return { deals, expected: deals.map((d) => pairs.get(d) ?? null) };
}

const bySourceId = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

/**
 * Otherwise (a run that does not import deals, or one begun before) mail is listed for the deals the ledger knows — ten per task,
 * checkpointed by deal index so a retry or a resume keeps its meaning. Deals this run failed to
 * import are walked too: their messages cannot be linked, and are skipped as such rather than
 * never seen, so every message of the account is accounted for.
 */
async function seedMail(ctx: SeedContext, perTask: number): Promise<TaskSeed[]> {
  const counted = ctx.run.plan.flat().includes("deals") ? await countedMailDeals(ctx) : undefined;
  if (counted) return mailSeeds(counted, perTask, "");
  // A dry run's deals are in the ledger only as it would have written them (its windows were
  // rolled back): the ledger's view counts them, so its mail walks the deals a real run would hold.
  const held = await ctx.ledger.heldSourceIds("deals");
  const failed = await ctx.failedSourceIds("deals");
  const ids = [...new Set([...held, ...failed])].sort(bySourceId);
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
  const [level, reason]: ["info" | "warn", string] =
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
  await ctx.noteOnce({ level, kind: "mail", subjectId: null, reason });
}
