import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { beforeEach, describe, expect, it } from "vitest";
import { Attr, initTelemetry, withSpan } from "../src/index.js";

const telemetry = initTelemetry({ serviceName: "tracing-test", exporter: "memory", env: {} });
const exporter = telemetry.memoryExporter!;

async function finishedSpans() {
  await telemetry.forceFlush();
  return exporter.getFinishedSpans();
}

beforeEach(() => exporter.reset());

describe("initTelemetry (memory)", () => {
  it("returns the same handle when called again", () => {
    expect(initTelemetry({ serviceName: "other", exporter: "none" })).toBe(telemetry);
  });

  it("records a span with attributes and the service resource", async () => {
    const span = telemetry.tracer.startSpan("plan", {
      attributes: { [Attr.runId]: "run-1", [Attr.attempt]: 2 },
    });
    span.end();

    const [recorded] = await finishedSpans();
    expect(recorded?.name).toBe("plan");
    expect(recorded?.attributes).toEqual({ "drover.run_id": "run-1", "drover.attempt": 2 });
    expect(recorded?.resource.attributes["service.name"]).toBe("tracing-test");
  });
});

describe("withSpan", () => {
  it("makes the span active, nests children and returns fn's value", async () => {
    const result = await withSpan("outer", { [Attr.taskId]: "t-1" }, async (outer) => {
      expect(trace.getActiveSpan()).toBe(outer);
      await withSpan("inner", {}, () => undefined, { kind: SpanKind.CLIENT });
      return 42;
    });
    expect(result).toBe(42);

    const spans = await finishedSpans();
    const outer = spans.find((s) => s.name === "outer")!;
    const inner = spans.find((s) => s.name === "inner")!;
    expect(inner.parentSpanContext?.spanId).toBe(outer.spanContext().spanId);
    expect(inner.kind).toBe(SpanKind.CLIENT);
    expect(outer.attributes[Attr.taskId]).toBe("t-1");
    expect(outer.status.code).toBe(SpanStatusCode.UNSET);
  });

  it("records the exception, sets ERROR status, ends the span and rethrows the same error", async () => {
    const boom = new Error("transform failed");
    await expect(
      withSpan("apply", { [Attr.phase]: "apply" }, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);

    const [span] = await finishedSpans();
    expect(span?.name).toBe("apply");
    expect(span?.ended).toBe(true);
    expect(span?.status).toEqual({ code: SpanStatusCode.ERROR, message: "transform failed" });
    expect(span?.events.map((e) => e.name)).toEqual(["exception"]);
    expect(span?.events[0]?.attributes?.["exception.message"]).toBe("transform failed");
  });

  it("marks synchronous throws of non-Error values too", async () => {
    await expect(
      withSpan("sync", {}, () => {
        throw "plain string";
      }),
    ).rejects.toBe("plain string");
    const [span] = await finishedSpans();
    expect(span?.status.code).toBe(SpanStatusCode.ERROR);
    expect(span?.status.message).toBe("plain string");
  });
});
