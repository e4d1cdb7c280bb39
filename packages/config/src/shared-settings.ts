import { identifier, intVar } from "./env.js";
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

/** The shared settings as the services' code (and GetSettings) names them. */
export interface SharedOptions {
  laneWidth: number;
  queuePrefix: string;
  maxAttempts: number;
  notesCap: number;
  staleTaskMs: number;
}

/** Each shared option's environment variable: the only place the two names meet. */
const VARIABLE_OF = {
  laneWidth: "DROVER_LANE_WIDTH",
  queuePrefix: "DROVER_QUEUE_PREFIX",
  maxAttempts: "DROVER_MAX_ATTEMPTS",
  notesCap: "DROVER_NOTES_CAP",
  staleTaskMs: "DROVER_STALE_TASK_MS",
} as const satisfies Record<keyof SharedOptions, keyof SharedSettings>;

const OPTIONS = Object.keys(VARIABLE_OF) as (keyof SharedOptions)[];

/** The shared options of a service's parsed environment. */
export function sharedOptions(config: SharedSettings): SharedOptions {
  return Object.fromEntries(
    OPTIONS.map((option) => [option, config[VARIABLE_OF[option]]]),
  ) as unknown as SharedOptions;
}

/** One sentence per setting whose values differ, naming its variable, both values and what to do. */
export function settingsDisagreements(worker: SharedOptions, coordinator: SharedOptions): string[] {
  return OPTIONS.filter((option) => worker[option] !== coordinator[option]).map(
    (option) =>
      `${VARIABLE_OF[option]}: this worker has ${JSON.stringify(worker[option])} but the coordinator ${JSON.stringify(coordinator[option])}; set the same value on both`,
  );
}

/** The keyring a coordinator seals and a worker opens source secrets with, as @drover/auth takes it. */
export interface KeyringOptions {
  keys?: string;
  file?: string;
  production: boolean;
}

/** From a parsed configuration or, for a command without a schema (keys), the environment itself. */
export function keyringOptions(config: {
  DROVER_SECRET_KEYS?: string;
  DROVER_SECRET_KEYS_FILE?: string;
  NODE_ENV?: string;
  [variable: string]: unknown;
}): KeyringOptions {
  return {
    keys: config.DROVER_SECRET_KEYS,
    file: config.DROVER_SECRET_KEYS_FILE,
    production: config.NODE_ENV === "production",
  };
}
