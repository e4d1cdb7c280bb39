import {
  PermanentError,
  type SourceClient,
  type SourceRow,
  type TaskContext,
  type TaskResult,
} from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { sourceId } from "./fields.js";
import { parseEmail, unwrapMail } from "./records.js";
import { writeEmail } from "./writers.js";

interface MailCursor {
  deals: string[];
  /** The deal being imported; every deal before it is done. */
  index: number;
}

interface V1List {
  data?: unknown[] | null;
  additional_data?: { pagination?: { more_items_in_collection?: boolean; next_start?: number } } | null;
}

/**
 * A mail task walks its deals in order. Per deal: list the messages, fetch the bodies not yet
 * committed (in parallel, holding no database connection), and only then write — the window
 * transactions open after every fetch has returned. The cursor moves to the next deal in the same
 * transaction as the deal's last window.
 */
export async function walkMail(ctx: TaskContext): Promise<TaskResult> {
  const { baseUrl, settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl);
  const cursor = ctx.task.cursor as unknown as MailCursor;
  const parents = await ctx.resolveParents({ deals: cursor.deals });
  const tenantId = ctx.run.tenantId;

  for (let i = cursor.index; i < cursor.deals.length; i = (ctx.task.cursor as unknown as MailCursor).index) {
    const deal = cursor.deals[i]!;
    const messages = await listMessages(client, deal, settings.pageSize, ctx.signal);
    ctx.working();
    const pending = messages.slice(ctx.task.processedOffset);
    const bodies = await fetchBodies(client, pending, settings.bodyConcurrency, ctx.signal);
    ctx.working();
    const rows: SourceRow<unknown>[] = messages.map((raw, j) => {
      const id = sourceId(raw);
      if (id === null)
        return { sourceId: `mail@deal${deal}#${j}`, data: { rowError: "the message has no usable id" } };
      try {
        return { sourceId: id, data: parseEmail(raw, deal, bodies.get(id) ?? null) };
      } catch (err) {
        return { sourceId: id, data: { rowError: (err as Error).message } };
      }
    });
    await ctx.writeRows(rows, (tx, email) => writeEmail(tx, tenantId, email as never, parents), {
      nextCursor: { deals: cursor.deals, index: i + 1 },
    });
  }
  return {};
}

async function listMessages(
  client: SourceClient,
  deal: string,
  limit: number,
  signal: AbortSignal,
): Promise<unknown[]> {
  const out: unknown[] = [];
  let start = 0;
  for (;;) {
    const page = await client.getJson<V1List>(
      `/v1/deals/${encodeURIComponent(deal)}/mailMessages`,
      { start, limit },
      "list",
      signal,
    );
    const items = Array.isArray(page?.data) ? page.data : [];
    out.push(...items.map(unwrapMail));
    const pagination = page?.additional_data?.pagination;
    if (!pagination?.more_items_in_collection || items.length === 0) return out;
    start = typeof pagination.next_start === "number" ? pagination.next_start : start + items.length;
  }
}

/**
 * Fetches message bodies with `concurrency` requests in flight. Every fetch is joined even when one
 * fails, then the first error surfaces, so no request is abandoned mid-flight. A body the token
 * cannot see (a permanent 4xx) is null: the message still imports with its headers and snippet.
 */
export async function fetchBodies(
  client: SourceClient,
  messages: readonly unknown[],
  concurrency: number,
  signal: AbortSignal,
): Promise<Map<string, string | null>> {
  const bodies = new Map<string, string | null>();
  const ids = messages.map(sourceId).filter((id): id is string => id !== null);
  for (let i = 0; i < ids.length; i += concurrency) {
    const slice = ids.slice(i, i + concurrency);
    const results = await Promise.allSettled(
      slice.map(async (id) => {
        try {
          const res = await client.getJson<{ data?: { body?: unknown } | null }>(
            `/v1/mailbox/mailMessages/${encodeURIComponent(id)}`,
            { include_body: 1 },
            "get",
            signal,
          );
          const body = res?.data?.body;
          return [id, typeof body === "string" && body !== "" ? body : null] as const;
        } catch (err) {
          if (err instanceof PermanentError) return [id, null] as const;
          throw err;
        }
      }),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failed) throw failed.reason;
    for (const r of results) if (r.status === "fulfilled") bodies.set(r.value[0], r.value[1]);
  }
  return bodies;
}
