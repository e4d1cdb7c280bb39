import {
  type Attributes,
  type Context,
  context,
  type Span,
  type SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

export interface WithSpanOptions {
  kind?: SpanKind;
  /** Parent context, e.g. from `extractTraceContext`; defaults to the active context. */
  parent?: Context;
}

// Resolved per call through the global API, so spans go to whichever provider initTelemetry registered
// (or nowhere, cheaply, when telemetry was never initialised).
const SCOPE = "@drover/telemetry";

/**
 * Runs `fn` inside a new active span and always ends it. A throw (or rejection) is recorded on the span,
 * marks it ERROR and is rethrown unchanged: tracing must never swallow or rewrap a failure.
 */
export async function withSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T> | T,
  options: WithSpanOptions = {},
): Promise<T> {
  const tracer = trace.getTracer(SCOPE);
  const parent = options.parent ?? context.active();
  const spanOptions = options.kind === undefined ? { attributes } : { attributes, kind: options.kind };
  return tracer.startActiveSpan(name, spanOptions, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      span.recordException(err);
      span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
      throw error;
    } finally {
      span.end();
    }
  });
}
