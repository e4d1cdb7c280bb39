import type { Queryable, RunRow } from "@drover/db";
import { timestampFromDate } from "@drover/proto";
import { sql } from "drizzle-orm";

export const DEFAULT_BUCKETS = 60;
export const MAX_BUCKETS = 500;

export interface Throughput {
  bucketSeconds: number;
  points: { at: ReturnType<typeof timestampFromDate>; rows: bigint }[];
}

/**
 * A run's rows over time, from what its windows committed (drover.window_commits: every row a
 * window accounted for, already-here rows included), by the time of each window's transaction. One row per
 * window, not per source row, so a live page can ask every few seconds, and a ledgerless source
 * (pg-table) has a throughput too.
 */
export async function runThroughput(
  q: Queryable,
  run: RunRow,
  buckets: number,
  now = new Date(),
): Promise<Throughput> {
  const start = run.startedAt ?? run.createdAt;
  const end = run.finishedAt ?? now;
  const seconds = Math.max(1, (end.getTime() - start.getTime()) / 1000);
  const bucketSeconds = Math.max(1, Math.ceil(seconds / buckets));
  const count = Math.max(1, Math.ceil(seconds / bucketSeconds));
  const rows = await q.execute<{ bucket: number; n: string }>(sql`
    select floor(extract(epoch from (committed_at - ${start.toISOString()}::timestamptz)) / ${bucketSeconds})::int as bucket,
           sum(rows)::bigint as n
      from drover.window_commits where run_id = ${run.id}::uuid
     group by 1`);
  const byBucket = new Map(rows.map((r) => [Number(r.bucket), BigInt(r.n)]));
  return {
    bucketSeconds,
    points: Array.from({ length: count }, (_, i) => ({
      at: timestampFromDate(new Date(start.getTime() + i * bucketSeconds * 1000)),
      // A row committed a moment before the run's recorded start (clock steps) lands in the first bucket.
      rows: (byBucket.get(i) ?? 0n) + (i === 0 ? sumBelow(byBucket, 0) : 0n),
    })),
  };
}

function sumBelow(byBucket: Map<number, bigint>, bucket: number): bigint {
  let n = 0n;
  for (const [b, rows] of byBucket) if (b < bucket) n += rows;
  return n;
}
