import type { TaskSeed } from "./provider.js";

/**
 * A follow pass's sweep: one task per kind for the deletions the pass's reads cannot see (a source
 * whose deletes leave its lists or its searches without a trace), applied through the context's
 * `applySourceDeletions` with the task's checkpoint. The cursor says `applied` once that committed:
 * a retry of the attempt then has nothing left to do.
 */
export interface SweepCursor {
  sweep: true;
  pass: number;
  applied?: boolean;
}

export function isSweepCursor(cursor: Record<string, unknown>): boolean {
  return cursor.sweep === true;
}

/** The sweep tasks of follow pass `pass`, one per kind, each keyed so the pass seeds it once. */
export function sweepSeeds(kinds: readonly string[], pass: number): TaskSeed[] {
  return kinds.map((kind) => {
    const cursor: SweepCursor = { sweep: true, pass };
    return { kind, seedKey: `follow${pass}:sweep:${kind}`, cursor: { ...cursor } };
  });
}
