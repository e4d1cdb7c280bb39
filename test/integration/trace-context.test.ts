import { Writable } from "node:stream";
import { RunStatus } from "@drover/proto";
import {
  createLogger,
  initTelemetry,
  injectTraceContext,
  type ReadableSpan,
  SpanKind,
  withSpan,
} from "@drover/telemetry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, untilFinished } from "../support/in-process.js";

// Before anything starts a span: every span of the coordinator and the worker (same process) lands here.
const telemetry = initTelemetry({ serviceName: "test", exporter: "memory" });

const workerLines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    for (const line of String(chunk).split("\n").filter(Boolean)) workerLines.push(JSON.parse(line));
    done();
  },
});

let c: Cluster;
let root: { traceId: string; spanId: string };
let runId: string;
let spans: ReadableSpan[];
let byId: Map<string, ReadableSpan>;
const parentOf = (s: ReadableSpan) => byId.get(s.parentSpanContext?.spanId ?? "");

beforeAll(async () => {
  c = await startCluster({
    workers: 1,
    clientMetadata: () => injectTraceContext(),
    loggers: { worker: createLogger("worker", { level: "info", destination: sink }) },
  });
  const started = await withSpan("caller", {}, async (span) => {
    const run = await c.start("trace-tenant", ["organizations", "persons", "deals", "leads"]);
    return { root: span.spanContext(), runId: run.id };
  });
  root = started.root;
  runId = started.runId;
  const done = await untilFinished(c, runId);
  expect(done.status).toBe(RunStatus.SUCCEEDED);
  // The last task's span ends just after its TaskFinished; let the workers go idle first.
  await c.workers[0]!.stop();
  await telemetry.forceFlush();
  spans = telemetry.memoryExporter!.getFinishedSpans();
  byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
});
afterAll(async () => {
  await c?.close();
  await telemetry.shutdown();
});

/** The task span a span hangs under, if any. */
function taskOf(span: ReadableSpan): ReadableSpan | undefined {
  for (let s: ReadableSpan | undefined = span; s; s = parentOf(s)) if (s.name === "task") return s;
  return undefined;
}

describe("trace context", { timeout: 60_000 }, () => {
  it("flows from StartRun through the NATS message headers into the worker's task spans", async () => {
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

  it("goes on into each task's pages, windows and source HTTP calls, all carrying run, task, kind, phase and attempt", async () => {
    const inRun = spans.filter((s) => s.spanContext().traceId === root.traceId);
    const pages = inRun.filter((s) => s.name === "page");
    const windows = inRun.filter((s) => s.name === "window");
    const calls = inRun.filter((s) => s.kind === SpanKind.CLIENT && s.name.startsWith("GET /"));
    expect(pages.length).toBeGreaterThan(0);
    // Every page that carried rows wrote them in windows under it (an empty page, e.g. a catch-up
    // page finding nothing changed, has none).
    const withRows = pages.filter((p) => Number(p.attributes["drover.rows"]) > 0);
    expect(withRows.length).toBeGreaterThan(0);
    for (const page of withRows) expect(windows.some((w) => parentOf(w) === page)).toBe(true);
    expect(calls.length).toBeGreaterThan(0);

    for (const window of windows) expect(parentOf(window)?.name).toBe("page");
    const rowsWritten = windows.reduce((n, w) => n + Number(w.attributes["drover.rows"]), 0);
    expect(rowsWritten).toBeGreaterThan(0);

    for (const span of [...pages, ...windows, ...calls]) {
      const task = taskOf(span);
      expect(task, `${span.name} hangs under a task`).toBeDefined();
      for (const key of [
        "drover.run_id",
        "drover.task_id",
        "drover.kind",
        "drover.phase",
        "drover.attempt",
      ]) {
        expect(span.attributes[key], `${span.name} carries ${key}`).toBe(task!.attributes[key]);
      }
      expect(span.attributes["drover.run_id"]).toBe(runId);
    }
    for (const call of calls) {
      expect(call.attributes["http.response.status_code"]).toBe(200);
      // The path only: no query string (cursors) and never the token.
      expect(String(call.attributes["url.path"])).toMatch(/^\/[a-zA-Z0-9/_-]+$/);
    }
  });

  it("puts the trace and span ids of the task on the worker's JSON log lines", async () => {
    const ended = workerLines.filter((l) => l.msg === "task ended" && l.run_id === runId);
    expect(ended.length).toBeGreaterThan(0);
    const taskSpans = new Set(spans.filter((s) => s.name === "task").map((s) => s.spanContext().spanId));
    for (const line of ended) {
      expect(line.trace_id).toBe(root.traceId);
      expect(taskSpans.has(String(line.span_id))).toBe(true);
    }
  });
});
