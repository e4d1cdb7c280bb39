import type { RunFollow } from "@drover/db";
import { type FollowStateSchema, type MessageInitShape, timestampFromDate } from "@drover/proto";

/**
 * The replication lag of a follow run: how long ago the last finished pass started, since what the
 * source changed after that moment may not be in the product yet. Measured to `at` (now, or the
 * run's end); undefined until a pass finished.
 */
export function replicationLagSeconds(follow: RunFollow, at: Date): number | undefined {
  const done = follow.passes.filter((p) => p.finishedAt !== null).at(-1);
  if (!done) return undefined;
  return Math.max(0, Math.floor((at.getTime() - Date.parse(done.startsAt)) / 1000));
}

/** runs.follow as the API shows it (Run.follow). */
export function followView(
  follow: RunFollow,
  finishedAt: Date | null,
): MessageInitShape<typeof FollowStateSchema> {
  const lag = replicationLagSeconds(follow, finishedAt ?? new Date());
  return {
    intervalSeconds: follow.intervalSeconds,
    ...(follow.cutoverAt ? { cutoverAt: timestampFromDate(new Date(follow.cutoverAt)) } : {}),
    ...(lag !== undefined ? { replicationLagSeconds: BigInt(lag) } : {}),
    ...(follow.feed
      ? {
          feed: follow.feed.mode,
          feedReason: follow.feed.reason ?? "",
          reconcileSeconds: follow.feed.reconcileSeconds ?? 0,
          ...(follow.feed.lastEventAt
            ? { lastEventAt: timestampFromDate(new Date(follow.feed.lastEventAt)) }
            : {}),
        }
      : {}),
    passes: follow.passes.map((p) => ({
      index: p.index,
      since: timestampFromDate(new Date(p.since)),
      startsAt: timestampFromDate(new Date(p.startsAt)),
      ...(p.finishedAt ? { finishedAt: timestampFromDate(new Date(p.finishedAt)) } : {}),
      changes: BigInt(p.changes ?? 0),
      deletions: BigInt(p.deletions ?? 0),
    })),
  };
}
