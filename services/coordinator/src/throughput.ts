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
 * A run's rows over time, from what it committed: each ledger row it wrote (created, matched,
 * skipped) and each failed row it noted, by the time of its window's transaction. "Already here"
 * rows are not counted: their ledger rows belong to the run that wrote them. One indexed pass over
 * the run's ledger rows (index on run_id), which a live page repeats every few seconds.
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
    select floor(extract(epoch from (x.at - ${start.toISOString()}::timestamptz)) / ${bucketSeconds})::int as bucket,
           count(*) as n
      from (select created_at as at from drover.ledger where run_id = ${run.id}::uuid
            union all
            select created_at from drover.notes where run_id = ${run.id}::uuid and level = 'error') x
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
