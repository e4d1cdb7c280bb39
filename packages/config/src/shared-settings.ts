import { identifier, intVar } from "./index.js";
import { staleTaskMs } from "./task-lock.js";

/**
 * Settings every coordinator and worker of a deployment must agree on. Each process reads them
 * from its own environment through this one definition; a worker compares its values with the
 * coordinator's at start (GetSettings) and refuses to run on a disagreement.
 */
export const SHARED_SETTINGS = {
  /** Tasks a worker runs at once; the dispatcher floors the pool at one worker's lane of it. */
  DROVER_LANE_WIDTH: intVar(1, 256, 4),
  /** Names the task stream, its subjects and the workers' consumer. */
  DROVER_QUEUE_PREFIX: identifier("drover"),
  /** Transient failures a task may have before it fails for good (the worker's and the reaper's). */
  DROVER_MAX_ATTEMPTS: intVar(1, 100, 8),
  /** Notes kept per run. */
  DROVER_NOTES_CAP: intVar(100, 10_000_000, 50_000),
  /** The reaper's stale-lock threshold; a worker derives and checks its touch interval from it. */
  DROVER_STALE_TASK_MS: staleTaskMs(),
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
