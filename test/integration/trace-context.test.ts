import { RunStatus } from "@drover/proto";
import { initTelemetry, injectTraceContext, type ReadableSpan, withSpan } from "@drover/telemetry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, untilFinished } from "../support/in-process.js";

// Before anything starts a span: every span of the coordinator and the worker (same process) lands here.
const telemetry = initTelemetry({ serviceName: "test", exporter: "memory" });

let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ workers: 1, clientMetadata: () => injectTraceContext() });
});
afterAll(async () => {
  await c?.close();
  await telemetry.shutdown();
});

describe("trace context", { timeout: 60_000 }, () => {
  it("flows from StartRun through the NATS message headers into the worker's task spans", async () => {
    const { root, runId } = await withSpan("caller", {}, async (span) => {
      const run = await c.start("trace-tenant", ["organizations", "persons", "deals", "leads"]);
      return { root: span.spanContext(), runId: run.id };
    });
    const done = await untilFinished(c, runId);
    expect(done.status).toBe(RunStatus.SUCCEEDED);
    // The last task's span ends just after its TaskFinished; let the workers go idle first.
    await c.workers[0]!.stop();
    await telemetry.forceFlush();

    const spans = telemetry.memoryExporter!.getFinishedSpans();
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const parentOf = (s: ReadableSpan) => byId.get(s.parentSpanContext?.spanId ?? "");
    const tasks = spans.filter((s) => s.name === "task" && s.attributes["drover.run_id"] === runId);

    const [row] = await c.database.sql<{ n: number }[]>`
      select count(*)::int as n from drover.tasks where run_id = ${runId}::uuid and status = 'succeeded'`;
    expect(tasks.length).toBeGreaterThanOrEqual(row!.n);
    for (const task of tasks) {
      expect(task.spanContext().traceId).toBe(root.traceId);
      const dispatch = parentOf(task);
      expect(dispatch?.name).toBe("dispatch");
      expect(dispatch!.spanContext().traceId).toBe(root.traceId);
      // dispatch → the StartRun server span → the caller's root span.
      const startRun = parentOf(dispatch!);
      expect(startRun?.name).toBe("drover.v1.RunService/StartRun");
      expect(startRun!.parentSpanContext?.spanId).toBe(root.spanId);
    }
  });
});
