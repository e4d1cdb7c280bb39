import { identifier, intVar } from "./index.js";
import { staleTaskMs } from "./task-lock.js";

/**
 * Settings every coordinator and worker of a deployment must agree on. Each process reads them
 * from its own environment through this one definition; a worker compares its values with the
 * coordinator's at start (GetSettings) and refuses to run on a disagreement.
 */
export const SHARED_SETTINGS = {
  DROVER_LANE_WIDTH: intVar(1, 256, 4).describe(
    "Tasks a worker runs at once (its lane), each holding at most one database connection at a time; the dispatcher floors the pool at one worker's lane of it.",
  ),
  DROVER_QUEUE_PREFIX: identifier("drover").describe(
    "Names the task stream (`<PREFIX>_TASKS`, `DROVER_TASKS` by default), its subjects and the workers' consumer.",
  ),
  DROVER_MAX_ATTEMPTS: intVar(1, 100, 8).describe(
    "Attempts a task may spend on transient failures, or on workers that keep dying under it, before it fails for good (the worker's count and the reaper's).",
  ),
  DROVER_NOTES_CAP: intVar(100, 10_000_000, 50_000).describe(
    "Warnings kept per run; row failures are never dropped.",
  ),
  DROVER_STALE_TASK_MS: staleTaskMs().describe(
    "A running task whose lock has not moved for this long belongs to a dead worker, and the leader's reaper hands it on: the backstop behind the workers' liveness records. A worker derives and checks its touch interval from it.",
  ),
};

export interface SharedSettings {
  DROVER_LANE_WIDTH: number;
  DROVER_QUEUE_PREFIX: string;
  DROVER_MAX_ATTEMPTS: number;
  DROVER_NOTES_CAP: number;
  DROVER_STALE_TASK_MS: number;
}

const NAMES = Object.keys(SHARED_SETTINGS) as (keyof SharedSettings)[];

/** Just the shared settings of a service's configuration. */
export function sharedSettingsOf(config: SharedSettings): SharedSettings {
  return Object.fromEntries(NAMES.map((name) => [name, config[name]])) as unknown as SharedSettings;
}

/** One sentence per setting whose values differ, naming both and what to do. */
export function settingsDisagreements(worker: SharedSettings, coordinator: SharedSettings): string[] {
  return NAMES.filter((name) => worker[name] !== coordinator[name]).map(
    (name) =>
      `${name}: this worker has ${JSON.stringify(worker[name])} but the coordinator ${JSON.stringify(coordinator[name])}; set the same value on both`,
  );
}
