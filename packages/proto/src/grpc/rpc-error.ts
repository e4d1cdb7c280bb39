import { Metadata, type ServiceError, type status } from "@grpc/grpc-js";

// Re-exported under our own name so services never import grpc-js just to pick a status code.
export { status as Code } from "@grpc/grpc-js";

type StatusCode = status;

// Structured details travel as one binary trailer: JSON in a -bin key survives any characters,
// whereas plain ASCII metadata values would reject non-ASCII text.
const DETAILS_KEY = "drover-error-details-bin";
// Set on every status a Drover server sends, so a client tells "the server answered UNAVAILABLE"
// (e.g. the source it had to read is down) from "no server answered" (grpc-js makes that status
// itself, as would a proxy with no server behind it).
const ANSWERED_KEY = "drover-answered";

// A brand rather than instanceof alone: the source build (tests) and dist build (production) may
// both be loaded in one process, and each has its own RpcError class.
const BRAND = Symbol.for("drover.proto.RpcError");

/** An error that crosses the wire as a gRPC status: throw it from handlers, catch it from clients. */
export class RpcError extends Error {
  override readonly name = "RpcError";
  readonly code: StatusCode;
  readonly details: Readonly<Record<string, string>>;
  /**
   * On the client: a Drover server sent this status. False when the call never reached one (no
   * connection, a name that does not resolve, a deadline that passed on the way).
   */
  readonly answered: boolean;
  readonly [BRAND] = true;

  constructor(
    code: StatusCode,
    message: string,
    details: Readonly<Record<string, string>> = {},
    answered = false,
  ) {
    super(message);
    this.code = code;
    this.details = details;
    this.answered = answered;
  }
}

export function isRpcError(err: unknown, code?: StatusCode): err is RpcError {
  const branded = typeof err === "object" && err !== null && (err as { [BRAND]?: unknown })[BRAND] === true;
  return branded && (code === undefined || (err as RpcError).code === code);
}

/** What grpc-js needs to send a status: `details` is grpc's name for the status message. */
export interface WireStatus {
  code: StatusCode;
  details: string;
  metadata: Metadata;
}

export function toWireStatus(err: RpcError): WireStatus {
  const metadata = new Metadata();
  metadata.set(ANSWERED_KEY, "1");
  if (Object.keys(err.details).length > 0) {
    metadata.set(DETAILS_KEY, Buffer.from(JSON.stringify(err.details), "utf8"));
  }
  return { code: err.code, details: err.message, metadata };
}

/** Turns a grpc-js client error into an RpcError; anything that is not a status passes through. */
export function fromClientError(err: unknown): unknown {
  if (!isServiceError(err)) return err;
  return new RpcError(
    err.code,
    err.details,
    readDetails(err.metadata),
    err.metadata?.get(ANSWERED_KEY)[0] === "1",
  );
}

function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === "number" && "details" in err;
}

function readDetails(metadata: Metadata | undefined): Record<string, string> {
  const raw = metadata?.get(DETAILS_KEY)[0];
  if (raw === undefined) return {};
  try {
    const parsed: unknown = JSON.parse(Buffer.isBuffer(raw) ? raw.toString("utf8") : raw);
    if (typeof parsed !== "object" || parsed === null) return {};
    return Object.fromEntries(
      Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === "string"),
    );
  } catch {
    // A peer that is not ours may use the key differently; the code and message still stand.
    return {};
  }
}
