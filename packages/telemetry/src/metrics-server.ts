import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type MetricsRegistry, metrics } from "./metrics.js";
import { PROMETHEUS_CONTENT_TYPE, renderPrometheus } from "./prometheus.js";

export interface MetricsServerOptions {
  host: string;
  /** 0 picks a free port (tests, several services on one machine). */
  port: number;
  registry?: MetricsRegistry;
}

export interface MetricsServer {
  /** `http://host:port/metrics`, for the ready line and the logs. */
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * `GET /metrics` in the Prometheus text format, on a port of its own so that scraping never shares
 * a listener (or its authentication) with the service's API. Gauges read from the database are
 * refreshed just before each scrape (MetricsRegistry.refresh).
 */
export async function serveMetrics(options: MetricsServerOptions): Promise<MetricsServer> {
  const registry = options.registry ?? metrics;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" || path !== "/metrics") {
      res
        .writeHead(404, { "content-type": "text/plain; charset=utf-8" })
        .end("not found: try GET /metrics\n");
      return;
    }
    registry
      .refresh()
      .then(() =>
        res.writeHead(200, { "content-type": PROMETHEUS_CONTENT_TYPE }).end(renderPrometheus(registry)),
      )
      .catch((err: Error) =>
        res.writeHead(500, { "content-type": "text/plain; charset=utf-8" }).end(`${err.message}\n`),
      );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        err.code === "EADDRINUSE"
          ? new Error(
              `the metrics port ${options.port} on ${options.host} is in use: pick another, 0 for a free one, or off`,
            )
          : err,
      ),
    );
    server.listen(options.port, options.host, () => {
      server.removeAllListeners("error");
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}/metrics`,
    port,
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
