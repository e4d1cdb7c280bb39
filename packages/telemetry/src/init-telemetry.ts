import { context, propagation, type Tracer, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { createOtlpTraceExporter, resolveOtlpTraceTarget } from "./otlp-exporter.js";
import { buildResource } from "./resource.js";

/**
 * - `auto`: OTLP export when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set, otherwise spans are created
 *   (so ids still propagate and reach the logs) but not exported.
 * - `memory`: keep finished spans in memory, for tests.
 * - `none`: never export.
 */
export type ExporterMode = "auto" | "memory" | "none";

export interface TelemetryOptions {
  serviceName: string;
  exporter?: ExporterMode;
  /** Defaults to process.env; injectable so tests need not mutate the real environment. */
  env?: NodeJS.ProcessEnv;
}

export interface TelemetryHandle {
  tracer: Tracer;
  /**
   * Present in `memory` mode. SimpleSpanProcessor hands spans to the exporter asynchronously, so call
   * `forceFlush()` before `getFinishedSpans()` or recent spans may be missing.
   */
  memoryExporter?: InMemorySpanExporter;
  forceFlush(): Promise<void>;
  /** Flushes, shuts the provider down and unregisters the globals so a later init starts afresh. */
  shutdown(): Promise<void>;
}

// Kept on globalThis rather than in module scope: a process can load this module twice (src through the
// source condition and dist through a built dependant), and the OTel globals exist only once.
const HANDLE_KEY = Symbol.for("drover.telemetry.handle");
type HandleSlot = { [HANDLE_KEY]?: TelemetryHandle };
const slot = globalThis as HandleSlot;

/**
 * Registers the tracer provider, context manager and W3C propagator globally. Idempotent: a second call
 * in the same process returns the first handle unchanged, whatever options it passes.
 */
export function initTelemetry(options: TelemetryOptions): TelemetryHandle {
  const existing = slot[HANDLE_KEY];
  if (existing) return existing;

  const env = options.env ?? process.env;
  const mode = options.exporter ?? "auto";
  const spanProcessors: SpanProcessor[] = [];
  let memoryExporter: InMemorySpanExporter | undefined;

  if (mode === "memory") {
    memoryExporter = new InMemorySpanExporter();
    spanProcessors.push(new SimpleSpanProcessor(memoryExporter));
  } else if (mode === "auto") {
    const target = resolveOtlpTraceTarget(env);
    if (target) spanProcessors.push(new BatchSpanProcessor(createOtlpTraceExporter(target)));
  }

  const provider = new BasicTracerProvider({
    resource: buildResource(options.serviceName, env),
    spanProcessors,
  });

  // AsyncLocalStorage is what makes the active span follow awaits; without it every span is a root.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);

  const handle: TelemetryHandle = {
    tracer: provider.getTracer(options.serviceName),
    memoryExporter,
    forceFlush: () => provider.forceFlush(),
    async shutdown() {
      if (slot[HANDLE_KEY] === handle) delete slot[HANDLE_KEY];
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
  slot[HANDLE_KEY] = handle;
  return handle;
}
