import { trace } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { initTelemetry, injectTraceContext, withSpan } from "../src/index.js";

describe("initTelemetry lifecycle", () => {
  it("'auto' without an endpoint still creates real spans, so ids propagate", async () => {
    const handle = initTelemetry({ serviceName: "lifecycle", exporter: "auto", env: {} });
    expect(handle.memoryExporter).toBeUndefined();
    await withSpan("job", {}, async (span) => {
      expect(span.isRecording()).toBe(true);
      expect(injectTraceContext().traceparent).toContain(span.spanContext().traceId);
    });
    await handle.shutdown();
  });

  it("shutdown unregisters the globals so init can start afresh", async () => {
    expect(trace.getActiveSpan()).toBeUndefined();
    await withSpan("after-shutdown", {}, async (span) => expect(span.isRecording()).toBe(false));

    const again = initTelemetry({ serviceName: "lifecycle-2", exporter: "memory", env: {} });
    await withSpan("again", {}, async () => undefined);
    await again.forceFlush();
    expect(again.memoryExporter?.getFinishedSpans().map((s) => s.name)).toEqual(["again"]);
    await again.shutdown();
  });
});
