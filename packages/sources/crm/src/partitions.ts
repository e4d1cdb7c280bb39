import type { RunInfo, TaskContext, TaskResult, TaskSeed } from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { asObject, timestamp } from "./fields.js";
import { items, type SourceList, type V2Envelope } from "./lists.js";

/** One chain of a partitioned v2 list: the rows with since <= update_time < until. */
export interface Partition {
  index: number;
  of: number;
  since: string;
  until: string;
}

/**
 * Where a pass cuts in time, one rule for every pass: the start of the whole second in which the
 * run began (its own walk ends there, its catch-up begins there) or, for a follow run's later pass,
 * the previous pass began. Pipedrive stores update times in whole seconds: a row changed in that
 * second after its list was read shows a time before the instant itself, so a cut at the instant
 * would miss it. Cut at the second's start, a pass also reads again what changed in that second
 * before the instant: a held row applied again unchanged is harmless.
 */
export function passCut(at: Date | string): string {
  return new Date(Math.floor(new Date(at).getTime() / 1000) * 1000).toISOString();
}

/**
 * Where the run's own walk ends and the catch-up pass begins (passCut of the run's start).
 * Partitions end here and the catch-up starts here, the same string both times, so no update_time
 * falls between the two.
 */
export function runStart(run: RunInfo): string {
  return passCut(run.startedAt ?? new Date(0));
}

/**
 * `of` adjacent half-open ranges from the oldest update_time to the run's start. Each range's until
 * is the next one's since, so a row updated exactly at a bound belongs to one range only. Every
 * bound is a whole second, the precision Pipedrive stores and documents its filters in; the last is
 * runStart, exactly where the catch-up pass begins.
 */
export function partitionRanges(oldestMs: number, start: string, of: number): Partition[] {
  const startMs = Date.parse(start);
  const first = Math.floor(oldestMs / 1000) * 1000;
  const bound = (i: number): string =>
    i === of
      ? start
      : new Date(Math.floor((first + Math.floor(((startMs - first) * i) / of)) / 1000) * 1000).toISOString();
  return Array.from({ length: of }, (_, index) => ({
    index,
    of,
    since: bound(index),
    until: bound(index + 1),
  }));
}

function updateTimeMs(raw: unknown): number | undefined {
  try {
    return timestamp(asObject(raw), "update_time")?.getTime();
  } catch {
    return undefined;
  }
}

/**
 * The coordinator never opens the source secret, so it cannot learn a list's time span when it
 * seeds the phase: a worker does, here, with the cheapest question the API answers (the one row
 * updated first), and seeds the list's partition chains as this task's successors.
 *
 * Rows updated after the run started fall outside every partition; the catch-up pass, which asks
 * for updated_since = the run's start, picks them up, so together the two miss nothing. A row edited
 * mid-run moves out of its partition in the same way and is imported by the catch-up.
 *
 * `firstPage` names the chain task starting at a cursor; the seedKeys it gives are deterministic
 * per (list, partition), so a split seeded twice or retried seeds no second set of chains.
 */
export async function splitList(
  ctx: TaskContext,
  list: SourceList,
  partitions: number,
  firstPage: (partition: Partition | undefined) => TaskSeed,
): Promise<TaskResult> {
  const { baseUrl } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);
  const body = await client.getJson<V2Envelope>(
    list.path,
    { ...list.params, limit: 1, sort_by: "update_time", sort_direction: "asc" },
    "list",
    ctx.signal,
  );
  const [oldest] = items(body);
  if (oldest === undefined) return { successors: [] };
  const oldestMs = updateTimeMs(oldest);
  // No time to split on: walk the whole list as one chain, as without partitions.
  if (oldestMs === undefined) return { successors: [firstPage(undefined)] };
  const start = runStart(ctx.run);
  // Everything was updated after the run started: the catch-up pass has it all.
  if (oldestMs >= Date.parse(start)) return { successors: [] };
  return { successors: partitionRanges(oldestMs, start, partitions).map((p) => firstPage(p)) };
}
