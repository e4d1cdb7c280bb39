import { type Context, context, propagation } from "@opentelemetry/api";

/**
 * The slice of NATS `MsgHdrs` that propagation needs, declared here so this package does not depend on
 * nats: headers from @nats-io/transport-node (and a Map-backed fake in tests) satisfy it structurally.
 * Extraction needs only `get`, so pass the headers straight to `extractTraceContext`/`withRemoteParent`.
 */
export interface NatsHeadersLike {
  get(k: string): string;
  set(k: string, v: string): void;
  has?(k: string): boolean;
}

/** Writes `traceparent`/`tracestate` of `ctx` (the active context by default) into message headers. */
export function injectTraceHeaders<H extends NatsHeadersLike>(
  headers: H,
  ctx: Context = context.active(),
): H {
  propagation.inject(ctx, headers, {
    set: (carrier, key, value) => carrier.set(key, value),
  });
  return headers;
}
