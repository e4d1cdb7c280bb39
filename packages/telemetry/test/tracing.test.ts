import { SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { beforeEach, describe, expect, it } from "vitest";
import { Attr, initTelemetry, withAttributes, withSpan } from "../src/index.js";

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

describe("drover attributes passed down", () => {
  it("gives every span inside a task the task's run, task, kind, phase and attempt, including facts learnt later", async () => {
    await withSpan("task", { [Attr.runId]: "run-9", [Attr.taskId]: 7, "http.irrelevant": "x" }, async () => {
      // Known once the task is claimed: set on the task span and passed to what runs inside.
      await withAttributes({ [Attr.kind]: "persons", [Attr.phase]: 1, [Attr.attempt]: 2 }, () =>
        withSpan("page", { "drover.rows": 50 }, () =>
          withSpan("GET /api/v2/persons", { "url.path": "/api/v2/persons" }, () => undefined),
        ),
      );
    });
    const spans = await finishedSpans();
    const byName = new Map(spans.map((s) => [s.name, s]));
    const expected = {
      "drover.run_id": "run-9",
      "drover.task_id": 7,
      "drover.kind": "persons",
      "drover.phase": 1,
      "drover.attempt": 2,
    };
    expect(byName.get("task")?.attributes).toMatchObject(expected);
    expect(byName.get("page")?.attributes).toMatchObject({ ...expected, "drover.rows": 50 });
    expect(byName.get("GET /api/v2/persons")?.attributes).toMatchObject({ ...expected, "drover.rows": 50 });
    // Only drover.* attributes are passed down, not another span's HTTP facts.
    expect(byName.get("page")?.attributes["http.irrelevant"]).toBeUndefined();
  });

  it("keeps sibling tasks apart", async () => {
    await Promise.all(
      ["a", "b"].map((id) =>
        withSpan("task", { [Attr.taskId]: id }, () =>
          withSpan("window", {}, () => new Promise((r) => setTimeout(r, 5))),
        ),
      ),
    );
    const windows = (await finishedSpans()).filter((s) => s.name === "window");
    expect(windows.map((w) => w.attributes["drover.task_id"]).sort()).toEqual(["a", "b"]);
  });
});
