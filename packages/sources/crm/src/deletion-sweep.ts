import {
  PermanentError,
  type RunInfo,
  type SourceClient,
  type SweepCursor,
  sweepSeeds,
  type TaskContext,
  type TaskResult,
  type TaskSeed,
} from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { sourceId } from "./fields.js";
import { readWholeList } from "./list-walker.js";
import { KIND_LISTS, PARENT_ORDER } from "./lists.js";
import { rowsByIds } from "./rows-by-ids.js";
import { COMPARED } from "./verifier.js";

/**
 * Deletions no list reports. Pipedrive lists only deals deleted in the last 30 days (status
 * deleted, applied by the catch-up like any change); a deleted person, organization, activity,
 * note or lead simply leaves every list. A follow pass ends with one sweep task per kind: it walks
 * the kind's lists for their ids (one list call per 500 rows), compares them with the ledger's, and
 * asks the source by id about each held row no list showed, the only rows that can be gone:
 * - Pipedrive marks a deleted record deleted for 30 days, then removes it ("After an entity has
 *   been permanently deleted, it won't be possible to retrieve it via any API request", changelog
 *   "Permanent deletion logic for 6 core entities"): a GET by id answers `is_deleted: true` (v2) or
 *   `active_flag: false` (v1 notes) in those 30 days, 404 after them and for a lead (deleted outright);
 * - v2 kinds first ask in `ids` lists (100 ids a request) when there are enough candidates for
 *   that to cost less than a GET each: what such a list returns is not deleted (it would be left
 *   out), only the rest is asked for one by one.
 * What it finds is applied through the ledger with the task's checkpoint (engine
 * source-deletions.ts). A held row marked deleted that a list shows again was restored.
 */

const PAGE_LIMIT = 500;
/**
 * A v2 list call costs ten GETs by id in Pipedrive's token model (10 tokens against 1): below this
 * many candidates an `ids` list costs more than asking for each.
 */
const BATCH_FROM = 10;

/** One sweep per row kind of the run (mail is listed per deal: a deleted deal's mail goes with it). */
export function sweepSeedsOf(run: RunInfo, pass: number): TaskSeed[] {
  const inRun = new Set(run.plan.flat());
  return sweepSeeds(
    PARENT_ORDER.filter((k) => inRun.has(k)),
    pass,
  );
}

export async function sweepDeletions(ctx: TaskContext): Promise<TaskResult> {
  const cursor = ctx.task.cursor as unknown as SweepCursor;
  if (cursor.applied) return {};
  const kind = ctx.task.kind;
  const lists = KIND_LISTS[kind];
  const check = COMPARED[kind];
  if (!lists || !check) throw new PermanentError(`crm provider cannot sweep kind "${kind}"`);
  if (!ctx.heldSourceRows || !ctx.applySourceDeletions)
    throw new PermanentError("this engine cannot apply deletions at the source");
  const { baseUrl } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);

  const listed = new Set<string>();
  for (const list of lists) {
    for (const raw of await readWholeList(client, list, PAGE_LIMIT, { signal: ctx.signal, pagesAtOnce: 4 })) {
      const id = sourceId(raw);
      if (id !== null) listed.add(id);
    }
    ctx.working();
  }
  // Read after the listing: a row added since it began is held but unlisted, and asked for by id.
  const held = await ctx.heldSourceRows(kind);
  const candidates = held.filter((h) => !h.deleted && !listed.has(h.sourceId)).map((h) => h.sourceId);
  const restored = held.filter((h) => h.deleted && listed.has(h.sourceId)).map((h) => h.sourceId);
  const gone = await confirmGone(ctx, client, kind, candidates);
  const applied: SweepCursor = { ...cursor, applied: true };
  await ctx.applySourceDeletions(kind, { gone, restored }, { ...applied });
  return {};
}

/** The candidates the source says are deleted (marked so, or not found at all). */
export async function confirmGone(
  ctx: TaskContext,
  client: SourceClient,
  kind: string,
  candidates: readonly string[],
): Promise<string[]> {
  const check = COMPARED[kind]!;
  const present =
    check.batch && candidates.length >= BATCH_FROM
      ? await rowsByIds(client, check.batch, candidates, {
          signal: ctx.signal,
          onPage: () => ctx.working(),
        })
      : new Map<string, unknown>();
  const gone: string[] = [];
  for (const id of candidates) {
    if (present.has(id)) continue;
    const { path, params } = check.fetch(id);
    try {
      const body = await client.getJson<{ data?: Record<string, unknown> | null }>(
        path,
        params,
        "get",
        ctx.signal,
      );
      const data = body?.data;
      if (!data || data.is_deleted === true || data.active_flag === false) gone.push(id);
    } catch (err) {
      // Only "not found" says gone; any other refusal is the task's to classify.
      if (err instanceof PermanentError && / 404\b/.test(err.message)) gone.push(id);
      else throw err;
    }
    ctx.working();
  }
  return gone;
}
