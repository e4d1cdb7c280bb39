import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { Attr, initTelemetry, withSpan } from "../src/index.js";

/** A collector's OTLP/HTTP JSON endpoint, in-process: what it received, by path. */
const received: { path: string; body: string; headers: IncomingMessage["headers"] }[] = [];
const collector = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => {
    body += c;
  });
  req.on("end", () => {
    received.push({ path: req.url ?? "", body, headers: req.headers });
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
});
await new Promise<void>((r) => collector.listen(0, "127.0.0.1", r));
const port = (collector.address() as AddressInfo).port;

afterAll(() => new Promise<void>((r) => collector.close(() => r())));

describe("the OTLP exporter, configured by OTEL_* variables alone", () => {
  it("sends the spans to OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, named by OTEL_SERVICE_NAME", async () => {
    const telemetry = initTelemetry({
      serviceName: "drover-worker",
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "worker-eu-1",
      },
    });
    try {
      await withSpan("task", { [Attr.runId]: "run-otlp", [Attr.kind]: "deals" }, () => undefined);
      await telemetry.forceFlush();
      const traces = received.filter((r) => r.path === "/v1/traces");
      expect(traces.length).toBeGreaterThan(0);
      const body = traces.map((t) => t.body).join("\n");
      expect(traces[0]!.headers["content-type"]).toMatch(/application\/json/);
      expect(body).toContain('"name":"task"');
      expect(body).toContain("run-otlp");
      expect(body).toContain("worker-eu-1");
    } finally {
      await telemetry.shutdown();
    }
  });
});
