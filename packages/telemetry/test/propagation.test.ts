import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { beforeEach, describe, expect, it } from "vitest";
import {
  extractTraceContext,
  initTelemetry,
  injectTraceContext,
  injectTraceHeaders,
  type NatsHeadersLike,
  withRemoteParent,
  withSpan,
} from "../src/index.js";

const telemetry = initTelemetry({ serviceName: "propagation-test", exporter: "memory", env: {} });
const exporter = telemetry.memoryExporter!;
beforeEach(() => exporter.reset());

/** Mimics NATS MsgHdrs: `get` answers "" for a missing key rather than undefined. */
class FakeNatsHeaders implements NatsHeadersLike {
  readonly map = new Map<string, string>();
  get(k: string): string {
    return this.map.get(k) ?? "";
  }
  set(k: string, v: string): void {
    this.map.set(k, v);
  }
  has(k: string): boolean {
    return this.map.has(k);
  }
  keys(): string[] {
    return [...this.map.keys()];
  }
}

async function spansByName() {
  await telemetry.forceFlush();
  return new Map(exporter.getFinishedSpans().map((s) => [s.name, s]));
}

describe("trace context propagation", () => {
  it("continues a trace from a plain record in a remote continuation", async () => {
    let carrier: Record<string, string> = {};
    await withSpan("coordinator.dispatch", {}, async () => {
      carrier = injectTraceContext();
    });
    expect(carrier.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);

    // The "remote" side starts from an empty context, as a fresh process would.
    await context.with(ROOT_CONTEXT, () =>
      withRemoteParent(carrier, () => withSpan("worker.run", {}, async () => undefined)),
    );

    const spans = await spansByName();
    const parent = spans.get("coordinator.dispatch")!;
    const child = spans.get("worker.run")!;
    expect(child.spanContext().traceId).toBe(parent.spanContext().traceId);
    expect(child.parentSpanContext?.spanId).toBe(parent.spanContext().spanId);
    expect(child.parentSpanContext?.isRemote).toBe(true);
  });

  it("hops coordinator -> NATS headers -> worker", async () => {
    const headers = new FakeNatsHeaders();
    headers.set("Nats-Msg-Id", "task-7");

    await withSpan("coordinator.publish", {}, async () => {
      injectTraceHeaders(headers);
    });
    expect(headers.has("traceparent")).toBe(true);

    // Worker: no span is active when the message arrives.
    expect(trace.getActiveSpan()).toBeUndefined();
    await withSpan("worker.consume", {}, async () => undefined, { parent: extractTraceContext(headers) });

    const spans = await spansByName();
    const publish = spans.get("coordinator.publish")!;
    const consume = spans.get("worker.consume")!;
    expect(consume.spanContext().traceId).toBe(publish.spanContext().traceId);
    expect(consume.parentSpanContext?.spanId).toBe(publish.spanContext().spanId);
  });

  it("starts a new trace when the carrier has no trace context", async () => {
    const ctx = extractTraceContext(new FakeNatsHeaders());
    expect(trace.getSpanContext(ctx)).toBeUndefined();
    expect(injectTraceContext()).toEqual({});
  });

  it("reads records whose keys were not lower-cased", async () => {
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const ctx = extractTraceContext({ Traceparent: traceparent });
    expect(trace.getSpanContext(ctx)?.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
  });
});
