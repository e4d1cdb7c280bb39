import { afterEach, describe, expect, it } from "vitest";
import { MetricsRegistry, type MetricsServer, serveMetrics } from "../src/index.js";

let server: MetricsServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("serveMetrics", () => {
  it("serves the registry on GET /metrics, refreshing database-read gauges first", async () => {
    const registry = new MetricsRegistry();
    const tasks = registry.gauge("drover_tasks", "Tasks by status", ["status"]);
    let reads = 0;
    registry.onRefresh(async () => {
      reads++;
      tasks.set({ status: "pending" }, 10 * reads);
    });
    server = await serveMetrics({ host: "127.0.0.1", port: 0, registry });
    expect(server.url).toBe(`http://127.0.0.1:${server.port}/metrics`);

    const first = await (await fetch(server.url)).text();
    expect(first).toContain('drover_tasks{status="pending"} 10');
    const second = await fetch(server.url);
    expect(second.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(await second.text()).toContain('drover_tasks{status="pending"} 20');
    expect((await fetch(new URL("/other", server.url))).status).toBe(404);
  });

  it("still answers when a refresher fails, with the gauge at its last value", async () => {
    const registry = new MetricsRegistry();
    const g = registry.gauge("drover_runs", "Runs", ["status"]);
    g.set({ status: "running" }, 3);
    registry.onRefresh(() => {
      throw new Error("database down");
    });
    server = await serveMetrics({ host: "127.0.0.1", port: 0, registry });
    const res = await fetch(server.url);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('drover_runs{status="running"} 3');
  });

  it("says which port is taken, and what to do", async () => {
    server = await serveMetrics({ host: "127.0.0.1", port: 0, registry: new MetricsRegistry() });
    await expect(serveMetrics({ host: "127.0.0.1", port: server.port })).rejects.toThrow(
      `the metrics port ${server.port} on 127.0.0.1 is in use: pick another, 0 for a free one, or off`,
    );
  });
});
