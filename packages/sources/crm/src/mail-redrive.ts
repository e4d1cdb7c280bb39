import type { SourceRow, TaskContext, TaskResult, TaskSeed } from "@drover/provider-sdk";
import { PermanentError, REDRIVE_SEED_KEY_PREFIX, type RedriveRow } from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { sourceId } from "./fields.js";
import {
  BODY_SOURCE_FACT,
  type BodySource,
  detectBodySource,
  fetchBodies,
  listMessages,
  pooled,
} from "./mail.js";
import { parseEmail } from "./records.js";
import { emailKind, independentBatch } from "./writers.js";

/** Messages one mail re-drive task writes: its deals' lists are walked once for all of them. */
const MESSAGES_PER_TASK = 100;

/**
 * A mail re-drive task's cursor: the messages to read again, in the order they are written, and
 * the deals whose lists held them (the noting task's deals). A message GET names no deal, so the
 * deal that links a message is found by listing those deals again. A message it fails again is
 * noted by this task: `deals` keeps the unit for the re-drive after it.
 */
export interface MailRedriveCursor {
  redrive: string[];
  deals: string[];
}

/**
 * Seeds for mail rows: one task per listing unit (the deals of the task that noted the rows), at
 * most MESSAGES_PER_TASK messages each. A mail task, a catch-up's mail task and a mail re-drive
 * task all keep their deals in their cursor.
 */
export function mailRedriveSeeds(rows: readonly RedriveRow[], key: string): TaskSeed[] {
  const byUnit = new Map<string, { deals: string[]; ids: string[] }>();
  for (const row of rows) {
    const deals = row.listedIn?.deals;
    if (!Array.isArray(deals) || deals.length === 0 || !deals.every((d) => typeof d === "string"))
      throw new PermanentError(
        `message ${row.sourceId} was noted by a task that names no deals, so no list holds it`,
      );
    const unit = (deals as string[]).join(",");
    const entry = byUnit.get(unit) ?? { deals: deals as string[], ids: [] };
    entry.ids.push(row.sourceId);
    byUnit.set(unit, entry);
  }
  const seeds: TaskSeed[] = [];
  let n = 0;
  for (const { deals, ids } of byUnit.values()) {
    for (let i = 0; i < ids.length; i += MESSAGES_PER_TASK) {
      const cursor: MailRedriveCursor = { redrive: ids.slice(i, i + MESSAGES_PER_TASK), deals };
      seeds.push({
        kind: "mail",
        seedKey: `${REDRIVE_SEED_KEY_PREFIX}${key}:mail:${n++}`,
        cursor: { ...cursor },
      });
    }
  }
  return seeds;
}

/**
 * A mail re-drive task: lists its deals' messages again (bodies in the list where the account's list
 * carries them, as the run found: BODY_SOURCE_FACT), stopping once every message asked for is found,
 * fetches the bodies of those messages alone where it does not, and writes only them, each linked
 * to the deal whose list holds it, in the cursor's order (so a retry's processed offset means the
 * same rows). A message no longer in any of the deals' lists is a row error, noted again.
 */
export async function redriveMail(ctx: TaskContext): Promise<TaskResult> {
  const { redrive: ids, deals } = ctx.task.cursor as unknown as MailRedriveCursor;
  const { baseUrl, settings } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);
  const wanted = new Set(ids);
  const known = (await ctx.runFact(BODY_SOURCE_FACT)) as BodySource | undefined;
  const found = new Map<string, { raw: unknown; deal: string }>();
  const lists: unknown[][] = [];
  // A lane takes the next deal only while messages are missing: the deals after the last one that
  // holds a wanted message are never asked for (lanes already in flight finish).
  await pooled(deals, settings.bodyConcurrency, async (deal) => {
    if (found.size === wanted.size) return;
    const messages = await listMessages(client, deal, settings.pageSize, ctx.signal, known !== "fetch");
    lists.push(messages);
    for (const raw of messages) {
      const id = sourceId(raw);
      if (id !== null && wanted.has(id) && !found.has(id)) found.set(id, { raw, deal });
    }
  });
  ctx.working();
  const bodySource = known ?? detectBodySource(lists);
  // Rows before the processed offset were committed by an earlier attempt: their bodies are not asked for.
  const open = ids.slice(ctx.task.processedOffset).filter((id) => found.has(id));
  const bodies =
    bodySource === "list"
      ? new Map(open.map((id) => [id, listedBody(found.get(id)!.raw)]))
      : await fetchBodies(client, open, settings.bodyConcurrency, ctx.signal);
  ctx.working();
  const rows: SourceRow<unknown>[] = ids.map((id) => {
    const at = found.get(id);
    if (!at)
      return { sourceId: id, data: { rowError: `no longer listed under deal(s) ${deals.join(", ")}` } };
    try {
      return { sourceId: id, data: parseEmail(at.raw, at.deal, bodies.get(id) ?? null) };
    } catch (err) {
      return { sourceId: id, data: { rowError: (err as Error).message } };
    }
  });
  const writer = async () =>
    independentBatch(
      emailKind,
      ctx.run.tenantId,
      await ctx.resolveParents({ deals: [...new Set([...found.values()].map((f) => f.deal))] }),
    );
  await ctx.writeBatches(rows as never, writer as never, { windowSize: settings.windowSize });
  return {};
}

function listedBody(raw: unknown): string | null {
  const body = (raw as { body?: unknown }).body;
  return typeof body === "string" && body !== "" ? body : null;
}
