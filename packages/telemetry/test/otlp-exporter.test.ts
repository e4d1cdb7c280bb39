import { OTLPTraceExporter as GrpcTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { describe, expect, it } from "vitest";
import { createOtlpTraceExporter, resolveOtlpTraceTarget } from "../src/otlp-exporter.js";
import { buildResource } from "../src/resource.js";

describe("resolveOtlpTraceTarget", () => {
  it("exports nothing unless an endpoint is configured", () => {
    expect(resolveOtlpTraceTarget({})).toBeUndefined();
    expect(resolveOtlpTraceTarget({ OTEL_EXPORTER_OTLP_ENDPOINT: "  " })).toBeUndefined();
  });

  it("defaults to http/protobuf and appends the signal path to the generic endpoint", () => {
    expect(resolveOtlpTraceTarget({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toEqual({
      protocol: "http/protobuf",
      url: "http://collector:4318/v1/traces",
    });
    expect(resolveOtlpTraceTarget({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/otlp/" })?.url).toBe(
      "http://collector:4318/otlp/v1/traces",
    );
  });

  it("uses the traces endpoint verbatim and the signal-specific protocol first", () => {
    expect(
      resolveOtlpTraceTarget({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://ignored:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4317",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "grpc",
      }),
    ).toEqual({ protocol: "grpc", url: "http://collector:4317" });
  });

  it("keeps the generic endpoint as-is for grpc", () => {
    expect(
      resolveOtlpTraceTarget({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4317",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      }),
    ).toEqual({ protocol: "grpc", url: "http://collector:4317" });
  });

  it("is disabled by OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    expect(resolveOtlpTraceTarget({ ...endpoint, OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
    expect(resolveOtlpTraceTarget({ ...endpoint, OTEL_SDK_DISABLED: "true" })).toBeUndefined();
  });

  it("rejects an unknown protocol", () => {
    expect(() =>
      resolveOtlpTraceTarget({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL: "udp",
      }),
    ).toThrow(/Unsupported/);
  });
});

describe("createOtlpTraceExporter", () => {
  it("builds the exporter matching the protocol without connecting", async () => {
    const proto = createOtlpTraceExporter({
      protocol: "http/protobuf",
      url: "http://127.0.0.1:4318/v1/traces",
    });
    const grpc = createOtlpTraceExporter({ protocol: "grpc", url: "http://127.0.0.1:4317" });
    expect(proto).toBeInstanceOf(ProtoTraceExporter);
    expect(grpc).toBeInstanceOf(GrpcTraceExporter);
    await Promise.all([proto.shutdown(), grpc.shutdown()]);
  });
});

describe("buildResource", () => {
  it("lets OTEL_SERVICE_NAME override the code's name and keeps OTEL_RESOURCE_ATTRIBUTES", () => {
    const resource = buildResource("coordinator", {
      OTEL_SERVICE_NAME: "coordinator-eu",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.name=ignored,team=mig%20rations,bad",
    });
    expect(resource.attributes).toMatchObject({
      "service.name": "coordinator-eu",
      "deployment.environment": "prod",
      team: "mig rations",
    });
    expect(buildResource("coordinator", {}).attributes["service.name"]).toBe("coordinator");
  });
});
