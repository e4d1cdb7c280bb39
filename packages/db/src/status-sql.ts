import { type SQL, sql } from "drizzle-orm";
import {
  RUN_STATUSES,
  type RunStatus,
  TASK_STATUSES,
  type TaskStatus,
  VERIFICATION_REQUEST_STATUSES,
  type VerificationRequestStatus,
} from "./statuses.js";

/**
 * The status words as SQL literals, interpolated from the frozen lists in statuses.ts (as pg-boss
 * interpolates its job states): a query names `${taskStatus.running}`, never types 'running' by
 * hand, so a word that is not a status fails the typecheck. Literals rather than parameters: the
 * planner must see the value to use the partial indexes written on it (tasks_running_locked,
 * runs_one_live_per_source), and the statement text stays what it was.
 */
function literals<S extends string>(words: readonly S[]): Readonly<Record<S, SQL>> {
  return Object.freeze(Object.fromEntries(words.map((w) => [w, sql.raw(`'${w}'`)])) as Record<S, SQL>);
}

export const runStatus = literals<RunStatus>(RUN_STATUSES);
export const taskStatus = literals<TaskStatus>(TASK_STATUSES);
export const verificationStatus = literals<VerificationRequestStatus>(VERIFICATION_REQUEST_STATUSES);

/** Status words as an SQL tuple, `('a','b')`, for `status in ${...}`: each a word of its list. */
function tuple(words: readonly string[]): SQL {
  return sql.raw(`(${words.map((w) => `'${w}'`).join(",")})`);
}

export const runStatusIn = (words: readonly RunStatus[]): SQL => tuple(words);
export const taskStatusIn = (words: readonly TaskStatus[]): SQL => tuple(words);
export const verificationStatusIn = (words: readonly VerificationRequestStatus[]): SQL => tuple(words);
