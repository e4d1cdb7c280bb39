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
import { changedSince, parseEmail, unwrapMail } from "./records.js";
import { emailKind, independentBatch } from "./writers.js";

/**
 * Where bodies come from: "list" when the account's per-deal list honours include_body (since
 * 2026, one request per deal), "fetch" when it does not (one GET per message: on a
 * large account, by far the longest phase).
 */
export type BodySource = "list" | "fetch";

/** The run fact holding the account's BodySource. */
export const BODY_SOURCE_FACT = "crm.mail.bodies";

export interface MailCursor {
  deals: string[];
  /** The deal being imported; every deal before it is done. */
  index: number;
  /** The run's finding (BODY_SOURCE_FACT), kept for the task's retries. */
  bodies?: BodySource;
  /**
   * The messages each deal's list should hold (its email_messages_count, by position in `deals`;
   * null where the source did not say): a list holding fewer is noted (mail-counts.ts).
   */
  expected?: (number | null)[];
  /** Set by the catch-up pass (the run's start): a message the listing shows updated since then is applied again. */
  since?: string;
  /**
   * What an attempt had fetched and not yet written when a rate limit (or a transient failure)
   * ended it: the message lists of deals from `index` on, and bodies by message id. The next
   * attempt starts from them and asks the source only for the rest; its first checkpoint drops
   * them from the cursor (the attempt holds them in memory from then on, and keeps them again if
   * it is ended the same way).
   */
  fetched?: FetchedMail;
}

export interface FetchedMail {
  lists: Record<string, unknown[]>;
  bodies: Record<string, string | null>;
}

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
  const { baseUrl, settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);
  const cursor = ctx.task.cursor as unknown as MailCursor;
  const tenantId = ctx.run.tenantId;
  const deals = cursor.deals.slice(cursor.index);
  const lists = new Map<string, unknown[]>(Object.entries(cursor.fetched?.lists ?? {}));
  const bodies = new Map<string, string | null>(Object.entries(cursor.fetched?.bodies ?? {}));
  const keepFetched = (err: unknown) => keepUnwritten(ctx, lists, bodies, err);
  const known = cursor.bodies ?? ((await ctx.runFact(BODY_SOURCE_FACT)) as BodySource | undefined);
  const askBodies = known !== "fetch";
  const listOf = (k: number) => lists.get(deals[k]!)!;
  const expected = new Map(cursor.deals.map((deal, i) => [deal, cursor.expected?.[i]]));
  let bodySource = known;
  let listed = 0;
  /** Lists deals from `listed` on until `messages` messages from deal `from` are in hand. */
  const listAhead = async (from: number, messages: number) => {
    const inHand = () => {
      let n = 0;
      for (let k = from; k < listed; k++) n += listOf(k).length;
      return n;
    };
    while (listed < deals.length && (listed <= from || inHand() < messages)) {
      const round = deals.slice(listed, listed + DEALS_PER_LIST_ROUND);
      await pooled(
        round.filter((deal) => !lists.has(deal)),
        settings.bodyConcurrency,
        async (deal) => {
          const messages = await listMessages(client, deal, settings.pageSize, ctx.signal, askBodies);
          await noteShortList(ctx, deal, messages.length, expected.get(deal));
          lists.set(deal, messages);
        },
      ).catch(keepFetched);
      listed += round.length;
      ctx.working();
    }
  };

  for (let g = 0; g < deals.length; ) {
    await listAhead(g, MESSAGES_PER_GROUP);
    // A group of deals whose messages fit in memory together (always at least one deal). The deal
    // a retry resumes inside is written alone: its committed offset counts its rows only.
    let end = g + 1;
    let size = listOf(g).length;
    if (!(g === 0 && ctx.task.processedOffset > 0))
      while (end < listed && size + listOf(end).length <= MESSAGES_PER_GROUP) size += listOf(end++).length;

    const messages = deals.slice(g, end).flatMap((deal) => lists.get(deal)!);
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
    if (!bodySource) {
      const found = detectBodySource([messages]);
      // Once per run: the first task whose lists carry messages decides for every task after it.
      if (found) bodySource = (await ctx.settleRunFact(BODY_SOURCE_FACT, found)) as BodySource;
    }

    const wanted: string[] = [];
    for (let k = g; k < end; k++) {
      const committed = k === 0 ? ctx.task.processedOffset : 0;
      for (const raw of listOf(k).slice(committed)) {
        const id = sourceId(raw);
        if (id === null || !needsBody(id) || bodies.has(id)) continue;
        // The list says the message has no body: asking for it would cost a request for nothing.
        if (saysNoBody(raw)) bodies.set(id, null);
        else wanted.push(id);
      }
    }
    const groupBodies =
      bodySource === "list"
        ? listedBodies(messages)
        : await fetchBodies(client, wanted, settings.bodyConcurrency, ctx.signal, bodies).catch(keepFetched);
    ctx.working();

    const rows: SourceRow<unknown>[] = [];
    /** Where each deal's rows start in `rows`, and (last) where they end. */
    const starts: number[] = [];
    for (let k = g; k < end; k++) {
      const deal = deals[k]!;
      starts.push(rows.length);
      for (const [j, raw] of listOf(k).entries()) {
        const id = sourceId(raw);
        if (id === null) {
          rows.push({
            sourceId: `mail@deal${deal}#${j}`,
            data: { rowError: "the message has no usable id" },
          });
          continue;
        }
        try {
          rows.push({ sourceId: id, data: parseEmail(raw, deal, groupBodies.get(id) ?? null) });
        } catch (err) {
          rows.push({ sourceId: id, data: { rowError: (err as Error).message } });
        }
      }
    }
    const at = (index: number) => ({
      deals: cursor.deals,
      index,
      ...(cursor.expected ? { expected: cursor.expected } : {}),
      ...(bodySource ? { bodies: bodySource } : {}),
      ...(cursor.since ? { since: cursor.since } : {}),
    });
    // Messages are independent rows: the deals' messages go in multi-row inserts.
    await ctx.writeBatches(rows, independentBatch(emailKind, tenantId, parents) as never, {
      windowSize: settings.windowSize,
      reapply: (row) => reapplied.has(row.sourceId),
      nextCursor: at(cursor.index + end),
      positionAfter: (done) => {
        const { deal, offset } = dealAt(starts, done);
        return { cursor: at(cursor.index + g + deal), processedOffset: offset };
      },
    });
    g = end;
  }
  return {};
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
