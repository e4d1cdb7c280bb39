export { type Attributes, type Context, type Span, SpanKind, type Tracer } from "@opentelemetry/api";
export type { InMemorySpanExporter, ReadableSpan } from "@opentelemetry/sdk-trace-base";
export { Attr, type AttrKey } from "./attributes.js";
export {
  type ExporterMode,
  initTelemetry,
  type TelemetryHandle,
  type TelemetryOptions,
} from "./init-telemetry.js";
export { createLogger, type Logger, type LoggerOptions } from "./logger.js";
export {
  type AnyMetric,
  Counter,
  DEFAULT_BUCKETS,
  Gauge,
  Histogram,
  type Labels,
  MetricsRegistry,
  type MetricType,
  metrics,
} from "./metrics.js";
export { type MetricsServer, type MetricsServerOptions, serveMetrics } from "./metrics-server.js";
export { injectTraceHeaders, type NatsHeadersLike } from "./nats-headers.js";
export { PROMETHEUS_CONTENT_TYPE, renderPrometheus } from "./prometheus.js";
export {
  extractTraceContext,
  type HeaderGetter,
  injectTraceContext,
  type TraceCarrier,
  withRemoteParent,
} from "./propagation.js";
export { type ServiceObservability, startServiceObservability } from "./service-observability.js";
export { type WithSpanOptions, withAttributes, withSpan } from "./with-span.js";
