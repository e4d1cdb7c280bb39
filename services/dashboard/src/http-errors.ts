import { Code, isRpcError } from "@drover/proto";

/** A failure as the page shows it: an HTTP status and one sentence a person can act on. */
export interface Problem {
  status: number;
  message: string;
}

/**
 * The coordinator's gRPC status, mapped once to HTTP. The coordinator's own messages are already
 * sentences (they name the run and what to do), so they pass through; what it cannot know (its
 * address, that the key came from this page) is added here.
 */
export function problemFor(err: unknown, coordinatorAddress: string): Problem {
  if (!isRpcError(err)) {
    return {
      status: 500,
      message: `Something went wrong in the dashboard: ${(err as Error)?.message ?? String(err)}`,
    };
  }
  switch (err.code) {
    case Code.UNAUTHENTICATED:
      return { status: 401, message: "The coordinator does not accept this API key. Enter a valid key." };
    case Code.PERMISSION_DENIED:
      return { status: 403, message: `This API key may not do that: ${err.message}` };
    case Code.NOT_FOUND:
      return { status: 404, message: sentence(err.message) };
    case Code.INVALID_ARGUMENT:
      return { status: 400, message: `The request was refused: ${err.message}` };
    case Code.FAILED_PRECONDITION:
    case Code.ALREADY_EXISTS:
      return { status: 409, message: sentence(err.message) };
    case Code.UNAVAILABLE:
    case Code.DEADLINE_EXCEEDED:
      // The coordinator answered, but cannot do it now (e.g. the source it had to read is down).
      if (err.answered)
        return { status: 503, message: sentence(`The coordinator cannot do that right now: ${err.message}`) };
      return {
        status: 503,
        message: `The coordinator at ${coordinatorAddress} cannot be reached right now (${err.message}). Is it running?`,
      };
    default:
      return { status: 502, message: `The coordinator answered ${Code[err.code]}: ${err.message}` };
  }
}

/** Capitalised and ending with a full stop, as the page shows it. */
export function sentence(text: string): string {
  const t = text.trim();
  if (!t) return t;
  const capital = t[0]!.toUpperCase() + t.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

/** A refusal the dashboard itself decides, thrown from a route and answered as JSON. */
export class HttpProblem extends Error {
  constructor(
    readonly problem: Problem,
    /** More for the page than a sentence, e.g. the runs a refused revert names. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(problem.message);
  }
}
