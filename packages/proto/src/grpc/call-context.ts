import type { Metadata } from "@grpc/grpc-js";
import { Code, RpcError } from "./rpc-error.js";

/** What a handler (and an interceptor) knows about the call beyond its request. */
export interface CallContext {
  /** `package.Service/Method`, the conventional RPC span name. */
  readonly method: string;
  /** Request metadata, first value per key; binary (`-bin`) values are base64. */
  readonly metadata: Readonly<Record<string, string>>;
  /** Aborted when the client cancels, the deadline passes or the server is forced down. */
  readonly signal: AbortSignal;
  readonly deadline?: Date;
  readonly peer: string;
}

/** The parts of a grpc-js server call the context is made from. */
interface ServerCallLike {
  readonly metadata: Metadata;
  readonly cancelled: boolean;
  getPeer(): string;
  getDeadline(): Date | number;
  once(event: "cancelled", listener: () => void): unknown;
  removeListener(event: "cancelled", listener: () => void): unknown;
}

export interface ActiveCall {
  ctx: CallContext;
  /** Call before answering: grpc-js also emits "cancelled" once a call has ended normally. */
  settle(): void;
}

export function callContext(call: ServerCallLike, method: string): ActiveCall {
  const controller = new AbortController();
  const cancel = () => controller.abort(new RpcError(Code.CANCELLED, "call cancelled"));
  if (call.cancelled) cancel();
  else call.once("cancelled", cancel);
  const deadline = toDate(call.getDeadline());
  const ctx: CallContext = {
    method,
    metadata: flatten(call.metadata),
    signal: controller.signal,
    ...(deadline ? { deadline } : {}),
    peer: call.getPeer(),
  };
  return { ctx, settle: () => call.removeListener("cancelled", cancel) };
}

function flatten(metadata: Metadata): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata.getMap())) {
    flat[key] = typeof value === "string" ? value : value.toString("base64");
  }
  return flat;
}

// grpc-js reports "no deadline" as Infinity.
function toDate(deadline: Date | number): Date | undefined {
  if (deadline instanceof Date) return deadline;
  return Number.isFinite(deadline) ? new Date(deadline) : undefined;
}
