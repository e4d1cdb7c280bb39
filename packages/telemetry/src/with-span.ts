import {
  type Attributes,
  type Context,
  context,
  createContextKey,
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

// The run, task, kind, phase and attempt a span was started for are carried in the context to the
// spans under it (pages, windows, source HTTP calls), so every one of them can be found by run or
// task without the code that starts them knowing the task.
const INHERITED = createContextKey("drover.inherited-attributes");
const DROVER_PREFIX = "drover.";

function inheritedAttributes(ctx: Context): Attributes {
  return (ctx.getValue(INHERITED) as Attributes | undefined) ?? {};
}

/**
 * Runs `fn` inside a new active span and always ends it. A throw (or rejection) is recorded on the span,
 * marks it ERROR and is rethrown unchanged: tracing must never swallow or rewrap a failure.
 * `drover.*` attributes pass down to every span started inside `fn` with withSpan.
 */
export async function withSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T> | T,
  options: WithSpanOptions = {},
): Promise<T> {
  const tracer = trace.getTracer(SCOPE);
  const parent = options.parent ?? context.active();
  const inherited = inheritedAttributes(parent);
  const own = Object.fromEntries(Object.entries(attributes).filter(([k]) => k.startsWith(DROVER_PREFIX)));
  const all = { ...inherited, ...attributes };
  const spanOptions =
    options.kind === undefined ? { attributes: all } : { attributes: all, kind: options.kind };
  const withInherited =
    Object.keys(own).length > 0 ? parent.setValue(INHERITED, { ...inherited, ...own }) : parent;
  return tracer.startActiveSpan(name, spanOptions, withInherited, async (span) => {
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

/**
 * Runs `fn` with `attributes` set on the active span and passed down, as withSpan's `drover.*`
 * attributes are, to every span started inside it: for facts learnt after a span began (a task's
 * kind, phase and attempt are known once it is claimed).
 */
export function withAttributes<T>(attributes: Attributes, fn: () => T): T {
  const active = context.active();
  trace.getSpan(active)?.setAttributes(attributes);
  return context.with(active.setValue(INHERITED, { ...inheritedAttributes(active), ...attributes }), fn);
}
