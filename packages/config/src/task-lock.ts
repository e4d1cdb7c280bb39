import { intVar, z } from "./env.js";

/**
 * A running task's lock is its worker's sign of life: the worker refreshes it (a touch) every
 * DROVER_TASK_TOUCH_MS, and the coordinator's reaper hands on a task whose lock is older than
 * DROVER_STALE_TASK_MS. Both processes read the threshold from the same variable (one of the
 * SHARED_SETTINGS, compared at a worker's start); the touch interval is derived from it unless
 * set, and a set one is checked against it at start.
 */

/** A running task whose lock has not moved for this long belongs to a dead worker. */
export function staleTaskMs() {
  return intVar(5_000, 3_600_000, 90_000);
}

/** How often a running task touches its lock; unset, it is derived from the stale threshold. */
export function taskTouchMs() {
  return z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number" })
    .min(100, { message: "must be at least 100" })
    .max(600_000, { message: "must be at most 600000" })
    .optional();
}

/**
 * Touches per stale threshold, at least. With fewer, one slow or lost touch (a busy database, a
 * garbage-collection pause) lets the reaper take a live task, and two attempts run it at once.
 */
export const MIN_TOUCHES_PER_STALE = 3;
/** Touches per stale threshold when the interval is derived: 90 s gives the 15 s used so far. */
const DERIVED_TOUCHES_PER_STALE = 6;
const MAX_DERIVED_TOUCH_MS = 15_000;

/** The touch interval a worker uses: the configured one, else a sixth of the threshold (at most 15 s). */
export function effectiveTouchMs(staleMs: number, configuredTouchMs?: number): number {
  return configuredTouchMs ?? Math.min(MAX_DERIVED_TOUCH_MS, Math.floor(staleMs / DERIVED_TOUCHES_PER_STALE));
}

/** What is wrong with a pair of touch interval and stale threshold; empty when the reaper cannot take a live task. */
export function taskLockProblems(staleMs: number, configuredTouchMs?: number): string[] {
  const touchMs = effectiveTouchMs(staleMs, configuredTouchMs);
  if (staleMs >= MIN_TOUCHES_PER_STALE * touchMs) return [];
  return [
    `DROVER_STALE_TASK_MS (${staleMs}) must be at least ${MIN_TOUCHES_PER_STALE}× DROVER_TASK_TOUCH_MS (${touchMs}), or the reaper can take a live task between two touches: raise DROVER_STALE_TASK_MS to at least ${MIN_TOUCHES_PER_STALE * touchMs} (on the coordinators and the workers alike), or lower DROVER_TASK_TOUCH_MS to at most ${Math.floor(staleMs / MIN_TOUCHES_PER_STALE)} (or unset it: it is then derived from DROVER_STALE_TASK_MS)`,
  ];
}
