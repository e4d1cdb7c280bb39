import {
  create,
  type DescMessage,
  type DescMethod,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  type ChannelCredentials,
  type ChannelOptions,
  type ClientReadableStream,
  type ClientUnaryCall,
  type CallOptions as GrpcCallOptions,
  type Client as GrpcClient,
  credentials as grpcCredentials,
  Metadata,
  makeGenericClientConstructor,
  type ServiceError,
} from "@grpc/grpc-js";
import type { AnyService } from "./add-service.js";
import { fromClientError } from "./rpc-error.js";
import { serviceDefinition } from "./service-definition.js";

export interface ClientOptions {
  /** Defaults to insecure (plaintext) credentials. */
  credentials?: ChannelCredentials;
  /** Called for every call, e.g. to inject the current `traceparent`. */
  metadata?: () => Record<string, string>;
  channelOptions?: ChannelOptions;
}

export interface CallOptions {
  deadline?: Date;
  /** Aborting cancels the call; the promise rejects (or the iteration throws) with CANCELLED. */
  signal?: AbortSignal;
  metadata?: Record<string, string>;
  /**
   * Wait (up to the deadline) for the channel to connect instead of failing at once with
   * UNAVAILABLE while nothing listens at the address yet: for a call made while its server may
   * still be starting.
   */
  waitForReady?: boolean;
}

export type UnaryMethod<I extends DescMessage, O extends DescMessage> = (
  request: MessageInitShape<I>,
  options?: CallOptions,
) => Promise<MessageShape<O>>;

/** The call starts on the first iteration; breaking out of the loop cancels it. */
export type ServerStreamingMethod<I extends DescMessage, O extends DescMessage> = (
  request: MessageInitShape<I>,
  options?: CallOptions,
) => AsyncIterable<MessageShape<O>>;

type ClientMethod<M extends Pick<DescMethod, "input" | "output" | "methodKind">> =
  M["methodKind"] extends "unary"
    ? UnaryMethod<M["input"], M["output"]>
    : M["methodKind"] extends "server_streaming"
      ? ServerStreamingMethod<M["input"], M["output"]>
      : never;

export type Client<S extends AnyService> = {
  [K in keyof S["method"]]: ClientMethod<S["method"][K]>;
} & {
  /** Closes the channel; calls in flight are cancelled. */
  close(): void;
};

// The generic client's per-method functions (which OpenTelemetry's grpc instrumentation patches).
type RawUnary = (
  request: unknown,
  metadata: Metadata,
  options: GrpcCallOptions,
  callback: (err: ServiceError | null, response?: unknown) => void,
) => ClientUnaryCall;
type RawServerStream = (
  request: unknown,
  metadata: Metadata,
  options: GrpcCallOptions,
) => ClientReadableStream<unknown>;

export function createClient<S extends AnyService>(
  desc: S,
  address: string,
  options: ClientOptions = {},
): Client<S> {
  const Constructor = makeGenericClientConstructor(serviceDefinition(desc), desc.name);
  const raw: GrpcClient = new Constructor(
    address,
    options.credentials ?? grpcCredentials.createInsecure(),
    options.channelOptions,
  );
  const methods: Record<string, unknown> = {};
  for (const method of desc.methods) {
    const fn = (raw as unknown as Record<string, unknown>)[method.localName];
    if (method.methodKind === "unary") {
      methods[method.localName] = unary(raw, method, fn as RawUnary, options);
    } else if (method.methodKind === "server_streaming") {
      methods[method.localName] = serverStream(raw, method, fn as RawServerStream, options);
    }
  }
  methods.close = () => raw.close();
  return methods as Client<S>;
}

function unary(raw: GrpcClient, method: DescMethod, fn: RawUnary, options: ClientOptions) {
  return (request: MessageInitShape<DescMessage>, callOptions: CallOptions = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const { signal } = callOptions;
      const onAbort = () => call.cancel();
      const call = fn.call(
        raw,
        create(method.input, request),
        metadataFor(options, callOptions),
        grpcCallOptions(callOptions),
        (err, response) => {
          signal?.removeEventListener("abort", onAbort);
          if (err) reject(fromClientError(err));
          else resolve(response);
        },
      );
      if (signal?.aborted) call.cancel();
      else signal?.addEventListener("abort", onAbort, { once: true });
    });
}

function serverStream(raw: GrpcClient, method: DescMethod, fn: RawServerStream, options: ClientOptions) {
  return (request: MessageInitShape<DescMessage>, callOptions: CallOptions = {}) => ({
    async *[Symbol.asyncIterator]() {
      const call = fn.call(
        raw,
        create(method.input, request),
        metadataFor(options, callOptions),
        grpcCallOptions(callOptions),
      );
      // The iteration surfaces errors; this keeps a late CANCELLED (after we stop reading) from
      // being an unhandled 'error' event.
      call.on("error", () => {});
      const { signal } = callOptions;
      const onAbort = () => call.cancel();
      if (signal?.aborted) call.cancel();
      else signal?.addEventListener("abort", onAbort, { once: true });
      try {
        for await (const message of call) yield message;
      } catch (err) {
        throw fromClientError(err);
      } finally {
        signal?.removeEventListener("abort", onAbort);
        // A no-op once the server has finished; otherwise the consumer broke out and the server
        // should stop producing.
        call.cancel();
      }
    },
  });
}

function metadataFor(options: ClientOptions, callOptions: CallOptions): Metadata {
  const metadata = new Metadata();
  for (const [key, value] of Object.entries({ ...options.metadata?.(), ...callOptions.metadata })) {
    metadata.set(key, key.endsWith("-bin") ? Buffer.from(value, "base64") : value);
  }
  if (callOptions.waitForReady) metadata.setOptions({ waitForReady: true });
  return metadata;
}

function grpcCallOptions(callOptions: CallOptions): GrpcCallOptions {
  return callOptions.deadline ? { deadline: callOptions.deadline } : {};
}
