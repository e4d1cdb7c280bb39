import type { Queryable } from "@drover/db";
import type { TaskSeed } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";

/**
 * Inserts tasks. The (run_id, seed_key) unique index makes seeding idempotent: a phase or stripe
 * successor seeded twice (a retried finish, two finishers) yields one task.
 */
export async function insertTaskSeeds(
  q: Queryable,
  runId: string,
  phase: number,
  seeds: readonly TaskSeed[],
): Promise<number> {
  if (seeds.length === 0) return 0;
  let inserted = 0;
  // Chunked: one statement per 500 seeds keeps parameters well under Postgres's 65535 limit.
  for (let i = 0; i < seeds.length; i += 500) {
    const chunk = seeds.slice(i, i + 500);
    const rows = await q.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
      select ${runId}::uuid, s.kind, ${phase}, s.seed_key, s.cursor
        from jsonb_to_recordset(${JSON.stringify(chunk.map((s) => ({ kind: s.kind, seed_key: s.seedKey, cursor: s.cursor })))}::jsonb)
             as s(kind text, seed_key text, cursor jsonb)
      on conflict (run_id, seed_key) do nothing
      returning id`);
    inserted += rows.length;
  }
  return inserted;
}
