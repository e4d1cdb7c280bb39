import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger, initTelemetry, withSpan } from "../src/index.js";

initTelemetry({ serviceName: "logger-test", exporter: "memory", env: {} });

function memoryDestination() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, stream };
}

describe("createLogger", () => {
  it("adds trace_id and span_id of the active span", async () => {
    const { lines, stream } = memoryDestination();
    const log = createLogger("worker", { destination: stream });

    log.info("outside");
    let ids = { traceId: "", spanId: "" };
    await withSpan("task", {}, async (span) => {
      ids = span.spanContext();
      log.child({ task_id: "t-1" }).info({ step: 1 }, "inside");
    });

    expect(lines[0]).not.toHaveProperty("trace_id");
    expect(lines[1]).toMatchObject({
      name: "worker",
      level: "info",
      msg: "inside",
      task_id: "t-1",
      step: 1,
      trace_id: ids.traceId,
      span_id: ids.spanId,
    });
  });

  it("redacts tokens and authorization headers", () => {
    const { lines, stream } = memoryDestination();
    const log = createLogger("api", { destination: stream });

    log.info(
      {
        api_token: "s3cret",
        apiToken: "s3cret",
        source: { api_token: "s3cret", url: "https://git.example" },
        headers: { authorization: "Bearer s3cret" },
        run: { id: "r1", secret: "s3cret" },
      },
      "configured",
    );

    expect(JSON.stringify(lines[0])).not.toContain("s3cret");
    expect(lines[0]).toMatchObject({
      api_token: "[Redacted]",
      apiToken: "[Redacted]",
      source: { api_token: "[Redacted]", url: "https://git.example" },
      headers: { authorization: "[Redacted]" },
      run: { id: "r1", secret: "[Redacted]" },
    });
  });

  it("takes the level from options, else LOG_LEVEL, else info", () => {
    const { stream } = memoryDestination();
    expect(createLogger("a", { destination: stream, level: "debug" }).level).toBe("debug");
    const previous = process.env.LOG_LEVEL;
    try {
      process.env.LOG_LEVEL = "warn";
      expect(createLogger("b", { destination: stream }).level).toBe("warn");
      delete process.env.LOG_LEVEL;
      expect(createLogger("c", { destination: stream }).level).toBe("info");
    } finally {
      if (previous === undefined) delete process.env.LOG_LEVEL;
      else process.env.LOG_LEVEL = previous;
    }
  });
});
