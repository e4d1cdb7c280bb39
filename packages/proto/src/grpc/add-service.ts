import {
  create,
  type DescMessage,
  type DescMethod,
  fromBinary,
  type Message,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { isDatabaseUnavailable } from "@drover/db/pg-error";
import type {
  Server,
  ServerUnaryCall,
  ServerWritableStream,
  sendUnaryData,
  UntypedHandleCall,
  UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { type CallContext, callContext } from "./call-context.js";
import { Code, isRpcError, RpcError, toWireStatus, type WireStatus } from "./rpc-error.js";
import { rawRequestDefinition } from "./service-definition.js";

export type AnyService = GenService<GenServiceMethods>;
type MethodShape = Pick<DescMethod, "input" | "output" | "methodKind">;

export type UnaryHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  ctx: CallContext,
) => Promise<MessageInitShape<O> | MessageShape<O>>;

export type ServerStreamingHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  ctx: CallContext,
) => AsyncIterable<MessageInitShape<O> | MessageShape<O>>;

// Client and bidi streaming are not bridged (the contract has none), so they cannot be implemented.
export type MethodHandler<M extends MethodShape> = M["methodKind"] extends "unary"
  ? UnaryHandler<M["input"], M["output"]>
  : M["methodKind"] extends "server_streaming"
    ? ServerStreamingHandler<M["input"], M["output"]>
    : never;

/** A handler per method, by localName; a missing one answers UNIMPLEMENTED. */
export type ServiceImplementation<S extends AnyService> = {
  [K in keyof S["method"]]?: MethodHandler<S["method"][K]>;
};

/**
 * Runs around every handler; for a server stream it spans the whole iteration. `request` decodes the
 * call's request on demand (once; it throws INVALID_ARGUMENT when malformed), so an interceptor that
 * never looks at it, such as authentication, answers before anything is decoded. For a unary call,
 * `next` resolves to the response message.
 */
export type Interceptor = <T>(ctx: CallContext, next: () => Promise<T>, request: () => unknown) => Promise<T>;

export interface AddServiceOptions {
  interceptor?: Interceptor;
  /** Sees every error that is not an RpcError; the client only gets INTERNAL "internal error". */
  onUnexpectedError?: (err: unknown, ctx: CallContext) => void;
}

export function addService<S extends AnyService>(
  server: Server,
  desc: S,
  implementation: ServiceImplementation<S>,
  options: AddServiceOptions = {},
): void {
  const handlers: UntypedServiceImplementation = {};
  const impl = implementation as Record<string, unknown>;
  for (const method of desc.methods) {
    const handler = impl[method.localName];
    const kind = method.methodKind;
    if (typeof handler !== "function" || (kind !== "unary" && kind !== "server_streaming")) {
      handlers[method.localName] = unimplemented(method);
    } else if (kind === "unary") {
      handlers[method.localName] = unaryCall(
        method,
        handler as UnaryHandler<DescMessage, DescMessage>,
        options,
      );
    } else {
      handlers[method.localName] = streamCall(
        method,
        handler as ServerStreamingHandler<DescMessage, DescMessage>,
        options,
      );
    }
  }
  server.addService(rawRequestDefinition(desc), handlers);
}

function unaryCall(
  method: DescMethod,
  handler: UnaryHandler<DescMessage, DescMessage>,
  options: AddServiceOptions,
): UntypedHandleCall {
  return (call: ServerUnaryCall<Buffer, Message>, callback: sendUnaryData<Message>) => {
    const { ctx, settle } = callContext(call, spanName(method));
    const request = decoder(method, call.request);
    intercept(ctx, options, request, async () => create(method.output, await handler(request(), ctx))).then(
      (response) => {
        settle();
        callback(null, response);
      },
      (err: unknown) => {
        settle();
        callback(statusFor(err, ctx, options));
      },
    );
  };
}

function streamCall(
  method: DescMethod,
  handler: ServerStreamingHandler<DescMessage, DescMessage>,
  options: AddServiceOptions,
): UntypedHandleCall {
  return (call: ServerWritableStream<Buffer, Message>) => {
    const { ctx, settle } = callContext(call, spanName(method));
    const request = decoder(method, call.request);
    intercept(ctx, options, request, async () => {
      const iterator = handler(request(), ctx)[Symbol.asyncIterator]();
      let finished = false;
      try {
        for (;;) {
          // Race the handler so a cancelled call ends now, even if the handler is stuck awaiting.
          const next = await untilAborted(iterator.next(), ctx.signal);
          if (next.done) {
            finished = true;
            return;
          }
          if (!call.write(create(method.output, next.value))) await untilAborted(drained(call), ctx.signal);
        }
      } finally {
        // Not awaited: a handler that ignores the signal must not hold the call (or its span) open.
        if (!finished) iterator.return?.().catch(() => {});
      }
    }).then(
      () => {
        settle();
        call.end();
      },
      (err: unknown) => {
        settle();
        if (!call.cancelled) call.emit("error", statusFor(err, ctx, options));
      },
    );
  };
}

function unimplemented(method: DescMethod): UntypedHandleCall {
  const status = toWireStatus(
    new RpcError(Code.UNIMPLEMENTED, `${method.parent.name}.${method.name} is not implemented yet`),
  );
  return (call: { emit(event: "error", status: WireStatus): unknown }, callback?: sendUnaryData<Message>) => {
    if (callback) callback(status);
    else call.emit("error", status);
  };
}

function spanName(method: DescMethod): string {
  return `${method.parent.typeName}/${method.name}`;
}

function decode(method: DescMethod, bytes: Buffer): Message {
  try {
    return fromBinary(method.input, bytes);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new RpcError(Code.INVALID_ARGUMENT, `malformed ${method.input.typeName}: ${reason}`);
  }
}

/** The request, decoded at the first ask and remembered (a malformed one throws each time). */
function decoder(method: DescMethod, bytes: Buffer): () => Message {
  let decoded: Message | undefined;
  return () => {
    decoded ??= decode(method, bytes);
    return decoded;
  };
}

async function intercept<T>(
  ctx: CallContext,
  options: AddServiceOptions,
  request: () => Message,
  next: () => Promise<T>,
): Promise<T> {
  return options.interceptor ? options.interceptor(ctx, next, request) : next();
}

function statusFor(err: unknown, ctx: CallContext, options: AddServiceOptions): WireStatus {
  const heard = callerStatus(err);
  if (heard.code === Code.INTERNAL && !isRpcError(err)) {
    try {
      options.onUnexpectedError?.(err, ctx);
    } catch {
      // A failing logger must not change what the client is told.
    }
  }
  return toWireStatus(heard);
}

/**
 * What a caller hears for any error a handler (or an interceptor) ends with; the audit trail
 * records the same. An RpcError as it is; the database restarting as UNAVAILABLE: not the caller's
 * fault nor a bug, worth a retry, and a status page says what is happening (nothing of the driver's
 * message, hosts or SQL, is passed on); anything else INTERNAL, never with its own message, which
 * may carry SQL, hostnames or secrets.
 */
export function callerStatus(err: unknown): RpcError {
  if (isRpcError(err)) return err;
  if (isDatabaseUnavailable(err))
    return new RpcError(
      Code.UNAVAILABLE,
      "waiting for the database: it does not answer right now; retry shortly",
      { reason: "DATABASE_UNAVAILABLE", retry_after_ms: "1000" },
    );
  return new RpcError(Code.INTERNAL, "internal error");
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

function drained(call: ServerWritableStream<Buffer, Message>): Promise<void> {
  return new Promise((resolve) => call.once("drain", () => resolve()));
}
