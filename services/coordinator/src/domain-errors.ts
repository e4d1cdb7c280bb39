/**
 * What a control-plane call can fail with, in the domain's words. Handlers throw these (or the
 * engine's own: LiveRunConflict, RunAlreadyReverted); the gRPC edge (rpc-status.ts) turns each into
 * its status code and typed details, once, for every RPC. A handler never picks a status code.
 *
 * `reason` is the machine-readable word a client may branch on (as google.rpc.ErrorInfo's reason:
 * UPPER_SNAKE_CASE, stable across releases); `details` carry the values it names (a run id).
 */
export abstract class DomainError extends Error {
  constructor(
    message: string,
    readonly reason: string,
    readonly details: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The caller named something that is not there (a run, a task of a run), or not theirs to see. */
export class NotFound extends DomainError {}

/** The request itself is wrong: a missing or malformed field, a setting the source refuses. */
export class InvalidInput extends DomainError {
  constructor(message: string, details: Readonly<Record<string, string>> = {}) {
    super(message, "INVALID_INPUT", details);
  }
}

/** The request is well formed but the run is not in a state that allows it (stop a finished run). */
export class Precondition extends DomainError {}

/**
 * What the call needs is down for now (a source being verified against, the broker, the leader);
 * the same call may work later. `retryAfterMs`, when known, says how soon it is worth asking again.
 */
export class Unavailable extends DomainError {
  constructor(
    message: string,
    reason: string,
    readonly retryAfterMs?: number,
  ) {
    super(message, reason);
  }
}

/** The work the call waits for goes on, past the call's deadline (a verification still running). */
export class StillWorking extends DomainError {}
