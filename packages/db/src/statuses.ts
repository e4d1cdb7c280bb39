/**
 * The run and task status vocabularies, defined once: the schema's check constraints and column
 * types, the engine's transitions, the API's RunStatus mapping, the CLI, the run page and the
 * metrics all read these lists. Dependency-free, so a client package can import it alone
 * (`@drover/db/statuses`).
 */

/** A run: admitted running (pending is reserved for admission), stopping → stopped, or finished. */
export const RUN_STATUSES = Object.freeze([
  "pending",
  "running",
  "stopping",
  "stopped",
  "succeeded",
  "failed",
] as const);
export type RunStatus = (typeof RUN_STATUSES)[number];

/** A live run holds its tenant and source account: one at a time (runs_one_live_per_source). */
export const LIVE_RUN_STATUSES = Object.freeze([
  "pending",
  "running",
  "stopping",
] as const satisfies readonly RunStatus[]);
/** A run that nothing moves any more, unless resumed (stopped) or retried (failed). */
export const FINISHED_RUN_STATUSES = Object.freeze([
  "stopped",
  "succeeded",
  "failed",
] as const satisfies readonly RunStatus[]);

/** A task: pending → running (claimed) → succeeded, failed or cancelled, or back to pending. */
export const TASK_STATUSES = Object.freeze([
  "pending",
  "running",
  "succeeded",
  "failed",
  "cancelled",
] as const);
export type TaskStatus = (typeof TASK_STATUSES)[number];

/** A task still to run or running: a phase holding one has not reached its barrier. */
export const OPEN_TASK_STATUSES = Object.freeze([
  "pending",
  "running",
] as const satisfies readonly TaskStatus[]);

/** A task whose attempts are over: it counts as done in a run's progress. */
export const ENDED_TASK_STATUSES = Object.freeze([
  "succeeded",
  "failed",
  "cancelled",
] as const satisfies readonly TaskStatus[]);

/** A verification request: pending (due at not_before) → running (claimed by a worker) → done. */
export const VERIFICATION_REQUEST_STATUSES = Object.freeze(["pending", "running", "done"] as const);
export type VerificationRequestStatus = (typeof VERIFICATION_REQUEST_STATUSES)[number];
