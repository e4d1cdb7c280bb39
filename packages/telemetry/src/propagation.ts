import { type Context, context, propagation, type TextMapGetter } from "@opentelemetry/api";

/** Anything with a `get`: a Map, NATS message headers, a Fetch `Headers`. */
export interface HeaderGetter {
  get(key: string): string | undefined | null;
  keys?(): Iterable<string>;
}

export type TraceCarrier = Record<string, string> | HeaderGetter;

function isHeaderGetter(carrier: TraceCarrier): carrier is HeaderGetter {
  return typeof (carrier as { get?: unknown }).get === "function";
}

function readRecord(carrier: Record<string, string>, key: string): string | undefined {
  if (Object.hasOwn(carrier, key)) return carrier[key];
  // Records that went through HTTP frameworks or hand-written JSON may not keep lower-case keys.
  const lower = key.toLowerCase();
  const match = Object.keys(carrier).find((k) => k.toLowerCase() === lower);
  return match === undefined ? undefined : carrier[match];
}

const carrierGetter: TextMapGetter<TraceCarrier> = {
  get(carrier, key) {
    const value = isHeaderGetter(carrier) ? carrier.get(key) : readRecord(carrier, key);
    // NATS headers answer "" for a missing key; the propagator must see that as absent.
    return value ? value : undefined;
  },
  keys(carrier) {
    if (!isHeaderGetter(carrier)) return Object.keys(carrier);
    return carrier.keys ? Array.from(carrier.keys()) : [];
  },
};

/** The `traceparent`/`tracestate` of `ctx` (the active context by default); empty when no span is active. */
export function injectTraceContext(ctx: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

/**
 * The context a remote caller sent. Missing or malformed headers yield the current context unchanged,
 * so a message from an untraced producer simply starts a new trace.
 */
export function extractTraceContext(carrier: TraceCarrier): Context {
  return propagation.extract(context.active(), carrier, carrierGetter);
}

/** Runs `fn` with the remote span as parent, so spans it starts join the caller's trace. */
export function withRemoteParent<T>(carrier: TraceCarrier, fn: () => T): T {
  return context.with(extractTraceContext(carrier), fn);
}
