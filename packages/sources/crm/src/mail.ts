import {
  classifyError,
  type ParentMap,
  PermanentError,
  type SourceClient,
  type SourceRow,
  type TaskContext,
  type TaskResult,
} from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { sourceId } from "./fields.js";
import { type V1Envelope, v1Pagination } from "./lists.js";
import { noteShortList } from "./mail-counts.js";
import { BODY_SOURCE_FACT, type BodySource, type FetchedMail, type MailCursor } from "./mail-cursor.js";
import { changedSince, parseEmail, unwrapMail } from "./records.js";
import { emailKind, independentBatch } from "./writers.js";

export { BODY_SOURCE_FACT, type BodySource, type FetchedMail, type MailCursor };

/**
 * Messages a task holds in memory at once, bodies included: deals are listed ahead until this many
 * messages are in hand (or the task's deals run out), then written together, in windows of the
 * run's windowSize. One ledger query resolves a group's deals and messages.
 */
const MESSAGES_PER_GROUP = 200;
/**
 * Deals listed per round while a task lists ahead (bodyConcurrency of them in flight): small
 * enough that a deal of thousands of messages overshoots the group by little, large enough that
 * the lanes of the pool stay full.
 */
const DEALS_PER_LIST_ROUND = 16;

/**
 * A mail task walks its deals in order, in groups of about MESSAGES_PER_GROUP messages. For each
 * group it fetches first — the message lists of its deals, `bodyConcurrency` requests in flight,
 * then every body not yet committed — holding no database connection; only then does it write the
 * group, in windows of the run's windowSize that may span many deals (most deals have a few
 * messages: a transaction per deal, and then per 25 messages, made the mail phase the run's
 * longest). Each window's checkpoint says at which deal, and how far into it, the task stands
 * (positionAfter), so a retry resumes at the row after the last committed window, as when deals
 * were written one by one. When a rate limit parks the task (or a transient failure releases it)
 * what it fetched and has not written is kept in its cursor (`fetched`), so the next attempt sends
 * no request twice.
 */
export async function walkMail(ctx: TaskContext): Promise<TaskResult> {
  const cursor = ctx.task.cursor as unknown as MailCursor;
  const known = cursor.bodies ?? ((await ctx.runFact(BODY_SOURCE_FACT)) as BodySource | undefined);
  const walk = new MailWalk(ctx, cursor, known);
  const { deals } = walk;
  for (let g = 0; g < deals.length; ) {
    await walk.listAhead(g, MESSAGES_PER_GROUP);
    const end = walk.groupEnd(g);
    const messages = deals.slice(g, end).flatMap((deal) => walk.lists.get(deal)!);
    // One ledger query for the deals the messages link to and for the messages already imported.
    const parents = await ctx.resolveParents({
      deals: deals.slice(g, end),
      mail: messages.flatMap((raw) => sourceId(raw) ?? []),
    });
    const reapplied = changedMessages(messages, parents, cursor.since);
    /**
     * A message the ledger already holds is written as nothing by the window (already here), unless
     * the catch-up applies it again because the listing shows it changed: its body would be thrown
     * away, so it is not fetched. On a re-run, or for the messages of a deal the catch-up lists again
     * because the deal changed, that is every message already imported. Held slots are never given
     * back during a run, so a message held here is still held when its window looks.
     */
    const needsBody = (id: string) => parents.get("mail", id) === undefined || reapplied.has(id);
    if (!walk.bodySource) {
      const found = detectBodySource([messages]);
      // Once per run: the first task whose lists carry messages decides for every task after it.
      if (found) walk.bodySource = (await ctx.settleRunFact(BODY_SOURCE_FACT, found)) as BodySource;
    }
    const groupBodies =
      walk.bodySource === "list" ? listedBodies(messages) : await walk.fetchBodies(g, end, needsBody);
    ctx.working();
    const { rows, starts } = walk.rowsOf(g, end, groupBodies);
    // Messages are independent rows: the deals' messages go in multi-row inserts.
    await ctx.writeBatches(rows, independentBatch(emailKind, ctx.run.tenantId, parents) as never, {
      windowSize: walk.settings.windowSize,
      reapply: (row) => reapplied.has(row.sourceId),
      nextCursor: walk.at(cursor.index + end),
      positionAfter: (done) => {
        const { deal, offset } = dealAt(starts, done);
        return { cursor: walk.at(cursor.index + g + deal), processedOffset: offset };
      },
    });
    g = end;
  }
  return {};
}

/**
 * One mail task's walk: the deals left, what it has listed and fetched so far (kept in the cursor
 * when a rate limit or a transient failure ends the attempt), and the account's body source.
 */
class MailWalk {
  readonly settings: ReturnType<typeof runSettings>["settings"];
  readonly deals: string[];
  readonly lists: Map<string, unknown[]>;
  readonly bodies: Map<string, string | null>;
  private readonly client: SourceClient;
  private readonly expected: Map<string, number | null | undefined>;
  /** Deals listed so far, from the first. */
  private listed = 0;
  /** The lists ask for bodies unless the run already knew, when the task began, that they carry none. */
  private readonly askBodies: boolean;

  constructor(
    private readonly ctx: TaskContext,
    private readonly cursor: MailCursor,
    public bodySource: BodySource | undefined,
  ) {
    const { baseUrl, settings } = runSettings(ctx.run);
    this.settings = settings;
    this.client = clientFor(ctx.run, baseUrl, ctx.pacer);
    this.deals = cursor.deals.slice(cursor.index);
    this.lists = new Map(Object.entries(cursor.fetched?.lists ?? {}));
    this.bodies = new Map(Object.entries(cursor.fetched?.bodies ?? {}));
    this.expected = new Map(cursor.deals.map((deal, i) => [deal, cursor.expected?.[i]]));
    this.askBodies = bodySource !== "fetch";
  }

  private listOf(k: number): unknown[] {
    return this.lists.get(this.deals[k]!)!;
  }

  private keepFetched = (err: unknown) => keepUnwritten(this.ctx, this.lists, this.bodies, err);

  /** Lists deals from the last listed on until `messages` messages from deal `from` are in hand. */
  async listAhead(from: number, messages: number): Promise<void> {
    const askBodies = this.askBodies;
    const inHand = () => {
      let n = 0;
      for (let k = from; k < this.listed; k++) n += this.listOf(k).length;
      return n;
    };
    while (this.listed < this.deals.length && (this.listed <= from || inHand() < messages)) {
      const round = this.deals.slice(this.listed, this.listed + DEALS_PER_LIST_ROUND);
      await pooled(
        round.filter((deal) => !this.lists.has(deal)),
        this.settings.bodyConcurrency,
        async (deal) => {
          const listed = await listMessages(
            this.client,
            deal,
            this.settings.pageSize,
            this.ctx.signal,
            askBodies,
          );
          await noteShortList(this.ctx, deal, listed.length, this.expected.get(deal));
          this.lists.set(deal, listed);
        },
      ).catch(this.keepFetched);
      this.listed += round.length;
      this.ctx.working();
    }
  }

  /**
   * Where the group of deals from `g` ends: as many as fit in memory together (always at least
   * one). The deal a retry resumes inside is written alone: its committed offset counts its rows only.
   */
  groupEnd(g: number): number {
    let end = g + 1;
    let size = this.listOf(g).length;
    if (!(g === 0 && this.ctx.task.processedOffset > 0))
      while (end < this.listed && size + this.listOf(end).length <= MESSAGES_PER_GROUP)
        size += this.listOf(end++).length;
    return end;
  }

  /** The bodies of deals [g, end) not committed yet that the group still needs, asked one GET each. */
  fetchBodies(
    g: number,
    end: number,
    needsBody: (id: string) => boolean,
  ): Promise<Map<string, string | null>> {
    const wanted: string[] = [];
    for (let k = g; k < end; k++) {
      const committed = k === 0 ? this.ctx.task.processedOffset : 0;
      for (const raw of this.listOf(k).slice(committed)) {
        const id = sourceId(raw);
        if (id === null || !needsBody(id) || this.bodies.has(id)) continue;
        // The list says the message has no body: asking for it would cost a request for nothing.
        if (saysNoBody(raw)) this.bodies.set(id, null);
        else wanted.push(id);
      }
    }
    return fetchBodies(
      this.client,
      wanted,
      this.settings.bodyConcurrency,
      this.ctx.signal,
      this.bodies,
    ).catch(this.keepFetched);
  }

  /** The rows of deals [g, end), and where each deal's rows start (`starts`, ascending). */
  rowsOf(
    g: number,
    end: number,
    bodies: ReadonlyMap<string, string | null>,
  ): { rows: SourceRow<unknown>[]; starts: number[] } {
    const rows: SourceRow<unknown>[] = [];
    const starts: number[] = [];
    for (let k = g; k < end; k++) {
      const deal = this.deals[k]!;
      starts.push(rows.length);
      for (const [j, raw] of this.listOf(k).entries()) {
        const id = sourceId(raw);
        if (id === null) {
          rows.push({
            sourceId: `mail@deal${deal}#${j}`,
            data: { rowError: "the message has no usable id" },
          });
          continue;
        }
        try {
          rows.push({ sourceId: id, data: parseEmail(raw, deal, bodies.get(id) ?? null) });
        } catch (err) {
          rows.push({ sourceId: id, data: { rowError: (err as Error).message } });
        }
      }
    }
    return { rows, starts };
  }

  /** The task's cursor at deal `index` of all its deals. */
  at(index: number): Record<string, unknown> {
    const c = this.cursor;
    return {
      deals: c.deals,
      index,
      ...(c.expected ? { expected: c.expected } : {}),
      ...(this.bodySource ? { bodies: this.bodySource } : {}),
      ...(c.since ? { since: c.since } : {}),
    };
  }
}

/**
 * Which deal of a window's rows row `row` belongs to, and how many rows of that deal come before
 * it, given where each deal's rows start (`starts`, ascending). Deals without messages start where
 * the next one does: the row belongs to the last deal starting at or before it, so a checkpoint
 * passes over empty deals, as writing deal by deal did.
 */
export function dealAt(starts: readonly number[], row: number): { deal: number; offset: number } {
  let deal = starts.length - 1;
  while (deal > 0 && starts[deal]! > row) deal--;
  return { deal, offset: row - starts[deal]! };
}

/**
 * Before a rate limit parks the task (or a transient failure releases it), what it fetched for the
 * deals it has not written yet goes into its cursor, so the next attempt does not ask for it again.
 * Keeping it is best effort: an attempt whose claim is gone keeps nothing, and the error it ends
 * with is the one that stopped it either way.
 */
async function keepUnwritten(
  ctx: TaskContext,
  lists: ReadonlyMap<string, unknown[]>,
  bodies: ReadonlyMap<string, string | null>,
  err: unknown,
): Promise<never> {
  const cls = classifyError(err);
  if ((cls === "rate_limited" || cls === "transient") && !ctx.signal.aborted) {
    const { fetched: _, ...at } = ctx.task.cursor as unknown as MailCursor;
    const kept: FetchedMail = { lists: {}, bodies: {} };
    for (const deal of at.deals.slice(at.index)) {
      const messages = lists.get(deal);
      if (!messages) continue;
      kept.lists[deal] = messages;
      for (const raw of messages) {
        const id = sourceId(raw);
        if (id !== null && bodies.has(id)) kept.bodies[id] = bodies.get(id)!;
      }
    }
    if (Object.keys(kept.lists).length > 0)
      await ctx.keepCursor({ ...at, fetched: kept } as unknown as Record<string, unknown>).catch(() => {});
  }
  throw err;
}

/**
 * The messages already imported that the catch-up applies again: those whose listing shows an
 * update_time at or after the run's start (`since`: changedSince, the catch-up's rule for every
 * kind; one without a readable update_time may have changed and is applied again too). Outside
 * the catch-up a message already imported is never applied again.
 */
function changedMessages(
  messages: readonly unknown[],
  held: ParentMap,
  since: string | undefined,
): Set<string> {
  const changed = new Set<string>();
  if (since === undefined) return changed;
  for (const m of messages) {
    const id = sourceId(m);
    if (id === null || held.get("mail", id) === undefined) continue;
    if (changedSince(m, since)) changed.add(id);
  }
  return changed;
}

/**
 * Whether the account's list honours include_body, read from a message that has a body
 * (`has_body_flag` 1): its body in the list says yes, no `body` key says no. A message without a body
 * says nothing: on either kind of account it may send no `body` key, `null` or `""`. Undecided
 * (undefined) while no listed message has a body; the caller then keeps asking for bodies in the
 * list and fetches them per message, and a later task decides.
 */
export function detectBodySource(lists: readonly (readonly unknown[])[]): BodySource | undefined {
  for (const messages of lists) {
    for (const m of messages) {
      if (typeof m !== "object" || m === null) continue;
      const message = m as { has_body_flag?: unknown; body?: unknown };
      if (message.has_body_flag !== 1 && message.has_body_flag !== true) continue;
      if (!("body" in message)) return "fetch";
      if (typeof message.body === "string" && message.body !== "") return "list";
    }
  }
  return undefined;
}

function listedBodies(messages: readonly unknown[]): Map<string, string | null> {
  const out = new Map<string, string | null>();
  for (const m of messages) {
    const id = sourceId(m);
    if (id === null) continue;
    const body = (m as { body?: unknown }).body;
    out.set(id, typeof body === "string" && body !== "" ? body : null);
  }
  return out;
}

/**
 * Runs `fn` over `items` with at most `concurrency` in flight, keeping results in order. On a
 * failure it starts nothing new, joins everything in flight, then throws the first error: no
 * request is abandoned mid-flight.
 */
export async function pooled<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const lane = async () => {
    while (!failure && next < items.length) {
      const i = next++;
      try {
        results[i] = await fn(items[i]!);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, lane));
  if (failure) throw failure.error;
  return results;
}

export async function listMessages(
  client: SourceClient,
  deal: string,
  limit: number,
  signal: AbortSignal,
  includeBody = false,
): Promise<unknown[]> {
  const out: unknown[] = [];
  let start = 0;
  for (;;) {
    const page = await client.getJson<V1Envelope>(
      `/v1/deals/${encodeURIComponent(deal)}/mailMessages`,
      { start, limit, ...(includeBody ? { include_body: 1 } : {}) },
      "list",
      signal,
    );
    const items = Array.isArray(page?.data) ? page.data : [];
    out.push(...items.map(unwrapMail));
    const pagination = v1Pagination(page);
    if (!pagination?.more_items_in_collection || items.length === 0) return out;
    start = typeof pagination.next_start === "number" ? pagination.next_start : start + items.length;
  }
}

/**
 * Whether a listed message says it has no body (`has_body_flag` 0, as Pipedrive's MailMessage model
 * has it: a calendar invite, an empty forward). A missing or unreadable flag says nothing, and the
 * body is asked for as before.
 */
export function saysNoBody(raw: unknown): boolean {
  if (typeof raw !== "object" || raw === null) return false;
  const flag = (raw as { has_body_flag?: unknown }).has_body_flag;
  return flag === 0 || flag === false;
}

/**
 * Fetches message bodies with `concurrency` requests in flight (each takes its budget slot just
 * before it goes; no database connection is held). A body the token cannot see (a permanent 4xx)
 * is null: the message still imports with its headers and snippet.
 */
export async function fetchBodies(
  client: SourceClient,
  ids: readonly string[],
  concurrency: number,
  signal: AbortSignal,
  /** Filled as each body arrives, so what came before a failure is still there after it. */
  into: Map<string, string | null> = new Map(),
): Promise<Map<string, string | null>> {
  await pooled(ids, concurrency, async (id) => {
    try {
      const res = await client.getJson<{ data?: { body?: unknown } | null }>(
        `/v1/mailbox/mailMessages/${encodeURIComponent(id)}`,
        { include_body: 1 },
        "get",
        signal,
      );
      const body = res?.data?.body;
      into.set(id, typeof body === "string" && body !== "" ? body : null);
    } catch (err) {
      if (err instanceof PermanentError) into.set(id, null);
      else throw err;
    }
  });
  return into;
}
