import { LiveRunConflict, MigrationClosed, MigrationLive, RunAlreadyReverted } from "@drover/engine";
import { Code, type Interceptor, RpcError } from "@drover/proto";
import {
  DomainError,
  InvalidInput,
  NotFound,
  Precondition,
  StillWorking,
  Unavailable,
} from "./domain-errors.js";

/**
 * The one table from the domain's errors to gRPC status codes. Every RunService and WorkerService
 * call passes through `domainErrorsAtEdge`, so a handler throws what happened (domain-errors.ts)
 * and the caller hears the code and typed details this table gives it:
 * - `reason` (google.rpc.ErrorInfo's): a stable word to branch on;
 * - the values the reason names (`run_id` of the live run, `reverted_by`);
 * - `retry_after_ms` (google.rpc.RetryInfo's retry_delay) where waiting helps.
 * Authentication and scopes are decided in auth.ts, itself the edge; the database restarting is
 * mapped by the proto bridge for every service (UNAVAILABLE, "waiting for the database").
 */
const CODES: ReadonlyArray<readonly [abstract new (...args: never[]) => DomainError, Code]> = [
  [NotFound, Code.NOT_FOUND],
  [InvalidInput, Code.INVALID_ARGUMENT],
  [Precondition, Code.FAILED_PRECONDITION],
  [Unavailable, Code.UNAVAILABLE],
  [StillWorking, Code.DEADLINE_EXCEEDED],
];

/** The status a domain error is sent as; anything else passes through unchanged. */
export function toRpcError(err: unknown): unknown {
  if (err instanceof LiveRunConflict)
    return new RpcError(Code.ALREADY_EXISTS, err.message, {
      reason: "LIVE_RUN_EXISTS",
      ...(err.liveRun ? { run_id: err.liveRun.id } : {}),
    });
  if (err instanceof RunAlreadyReverted)
    return new RpcError(
      Code.FAILED_PRECONDITION,
      `run ${err.runId} is already reverted by run ${err.revertedBy}; resume or retry that run if it did not finish`,
      { reason: "RUN_REVERTED", reverted_by: err.revertedBy },
    );
  if (err instanceof MigrationClosed)
    return new RpcError(Code.FAILED_PRECONDITION, err.message, {
      reason: "MIGRATION_CLOSED",
      remove_after: err.closure.removeAfter.toISOString(),
    });
  if (err instanceof MigrationLive)
    return new RpcError(Code.FAILED_PRECONDITION, err.message, { reason: "RUN_LIVE", run_id: err.runId });
  if (!(err instanceof DomainError)) return err;
  const code = CODES.find(([type]) => err instanceof type)?.[1] ?? Code.INTERNAL;
  const retry = err instanceof Unavailable && err.retryAfterMs !== undefined;
  return new RpcError(code, err.message, {
    reason: err.reason,
    ...err.details,
    ...(retry ? { retry_after_ms: String(err.retryAfterMs) } : {}),
  });
}

/** Innermost around each handler, so the audit trail and the span see the status the caller hears. */
export const domainErrorsAtEdge: Interceptor = (_call, next) =>
  next().catch((err: unknown) => {
    throw toRpcError(err);
  });
