import { trace } from "@opentelemetry/api";
import { type DestinationStream, type Level, type Logger as PinoLogger, pino } from "pino";

export type Logger = PinoLogger;

export interface LoggerOptions {
  /** Defaults to LOG_LEVEL, then "info". */
  level?: Level | "silent";
  /** Defaults to stdout; tests pass an in-memory stream. */
  destination?: DestinationStream;
}

// Secrets reach log calls through config objects and request headers; censor them at the source since
// log pipelines are read by more people than the secrets are meant for.
const REDACT_PATHS = [
  "api_token",
  "apiToken",
  "token",
  "password",
  "authorization",
  "*.api_token",
  "*.apiToken",
  "*.token",
  "*.password",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
  // A provider's view of a run carries the decrypted source credential as `secret`.
  "secret",
  "*.secret",
  "ctx.run.secret",
];

/**
 * JSON logger whose lines carry `trace_id`/`span_id` of the active span, so a log line leads to its trace
 * and back.
 */
export function createLogger(name: string, options: LoggerOptions = {}): Logger {
  const level = options.level ?? (process.env.LOG_LEVEL?.trim() || "info");
  const config = {
    name,
    level,
    redact: { paths: REDACT_PATHS, censor: "[Redacted]" },
    formatters: { level: (label: string) => ({ level: label }) },
    mixin() {
      const spanContext = trace.getActiveSpan()?.spanContext();
      if (!spanContext || !trace.isSpanContextValid(spanContext)) return {};
      return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
    },
  };
  return options.destination ? pino(config, options.destination) : pino(config);
}
