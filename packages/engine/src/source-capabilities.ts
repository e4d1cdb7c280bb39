import type { Queryable, Tx } from "@drover/db";
import type {
  DryRunMatches,
  EstimateContext,
  RunInfo,
  SeedCapabilities,
  SeedContext,
  TaskTally,
  VerifyCapabilities,
} from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { ledgerLookup } from "./ledger-lookup.js";
import { appendNoteOnce } from "./notes.js";
import { keptCursors, readRunFact } from "./run-facts.js";

/**
 * The capabilities the engine hands a source in each context, in place of its own tables: a source
 * package never reads or writes `drover.*` (test/layout/source-packages.test.ts).
 */

/** A phase's seeding: every read and the note in the barrier's transaction, so they commit with it. */
export function seedCapabilities(tx: Tx, run: RunInfo): SeedCapabilities {
  return {
    ledger: ledgerLookup(tx, run),
    keptCursors: (kind, key) => keptCursors(tx, run.id, kind, key),
    failedSourceIds: (kind) => failedSourceIds(tx, run.id, kind),
    noteOnce: (note) => appendNoteOnce(tx, run.id, null, note),
  };
}

/** What a provider's seedPhase gets: the phase, the barrier's transaction and the capabilities. */
export function seedContext(
  tx: Tx,
  run: RunInfo,
  phase: number,
  kinds: readonly string[],
  pass?: SeedContext["pass"],
): SeedContext {
  return { run, phase, kinds, tx, ...(pass ? { pass } : {}), ...seedCapabilities(tx, run) };
}

/** Verification's reads of the run: the ledger and what its tasks listed. */
export function verifyCapabilities(q: Queryable, run: RunInfo): VerifyCapabilities {
  return {
    ledger: ledgerLookup(q, run),
    listedCount: (kind, cursorMatch) => listedCount(q, run.id, kind, cursorMatch),
  };
}

/** A work estimate's reads: the run's tasks tallied by the caller, its facts, ledger and the product. */
export function estimateContext(q: Queryable, run: RunInfo, tasks: readonly TaskTally[]): EstimateContext {
  return { run, tasks, db: q, ledger: ledgerLookup(q, run), runFact: (key) => readRunFact(q, run.id, key) };
}

/** A dry run's would-be rows by match key (a person's lower-cased email), in the window's transaction. */
export function dryRunMatches(runId: string): DryRunMatches {
  return {
    async matchKeys(tx, kind, keys) {
      if (keys.length === 0) return new Set();
      const rows = await tx.execute<{ k: string }>(sql`
        select distinct match_key as k from drover.dry_run_rows
         where run_id = ${runId}::uuid and kind = ${kind} and match_key = any(${sql.param([...keys])}::text[])`);
      return new Set(rows.map((r) => r.k));
    },
  };
}

async function failedSourceIds(q: Queryable, runId: string, kind: string): Promise<string[]> {
  const rows = await q.execute<{ subject_id: string }>(sql`
    select distinct subject_id from drover.notes
     where run_id = ${runId}::uuid and kind = ${kind} and level = 'error' and subject_id is not null`);
  return rows.map((r) => r.subject_id);
}

async function listedCount(
  q: Queryable,
  runId: string,
  kind: string,
  cursorMatch: Record<string, unknown>,
): Promise<number> {
  const [row] = await q.execute<{ n: number }>(sql`
    select count(distinct x.id)::int as n from drover.tasks t, unnest(t.listed_ids) as x(id)
     where t.run_id = ${runId}::uuid and t.kind = ${kind} and t.cursor @> ${JSON.stringify(cursorMatch)}::jsonb`);
  return row?.n ?? 0;
}
