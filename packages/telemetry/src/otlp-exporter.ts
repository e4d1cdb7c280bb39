import { OTLPTraceExporter as GrpcTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";

export type OtlpProtocol = "http/protobuf" | "http/json" | "grpc";

export interface OtlpTraceTarget {
  protocol: OtlpProtocol;
  url: string;
}

const PROTOCOLS: readonly OtlpProtocol[] = ["http/protobuf", "http/json", "grpc"];

function read(env: NodeJS.ProcessEnv, key: string): string | undefined {
  const value = env[key]?.trim();
  return value ? value : undefined;
}

/**
 * Decides from the standard OTEL_* variables whether traces leave the process, and where to. Returns
 * undefined when nothing asks for export: a developer laptop or a test run must not try to reach a
 * collector that is not there.
 */
export function resolveOtlpTraceTarget(env: NodeJS.ProcessEnv): OtlpTraceTarget | undefined {
  if (read(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return undefined;
  if (read(env, "OTEL_TRACES_EXPORTER")?.toLowerCase() === "none") return undefined;

  const specific = read(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const generic = read(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  if (!specific && !generic) return undefined;

  const rawProtocol =
    read(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ??
    read(env, "OTEL_EXPORTER_OTLP_PROTOCOL") ??
    "http/protobuf";
  const protocol = PROTOCOLS.find((p) => p === rawProtocol);
  if (!protocol) {
    // Fail at boot: silently falling back would send spans somewhere the operator did not configure.
    throw new Error(
      `Unsupported OTEL_EXPORTER_OTLP_PROTOCOL "${rawProtocol}" (expected ${PROTOCOLS.join(", ")})`,
    );
  }

  // Per the OTLP exporter spec, a signal-specific endpoint is used verbatim, while the generic one is a
  // base URL that http transports extend with the signal path; gRPC never takes a path.
  let url: string;
  if (specific) url = specific;
  else if (protocol === "grpc") url = generic!;
  else url = `${generic!.endsWith("/") ? generic : `${generic}/`}v1/traces`;
  return { protocol, url };
}

/**
 * The URL is passed explicitly so that an injected `env` is honoured; headers, TLS files and timeouts
 * are still read by the exporter itself from process.env.
 */
export function createOtlpTraceExporter(target: OtlpTraceTarget): SpanExporter {
  switch (target.protocol) {
    case "grpc":
      return new GrpcTraceExporter({ url: target.url });
    case "http/json":
      return new JsonTraceExporter({ url: target.url });
    case "http/protobuf":
      return new ProtoTraceExporter({ url: target.url });
  }
}
