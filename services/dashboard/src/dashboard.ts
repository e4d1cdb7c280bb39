import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { channelCredentials } from "@drover/auth";
import { createClient, RunService } from "@drover/proto";
import {
  createLogger,
  injectTraceContext,
  type Logger,
  metrics,
  SpanKind,
  withSpan,
} from "@drover/telemetry";
import { serveApi } from "./api.js";
import type { DashboardConfig } from "./config.js";
import type { Coordinator } from "./coordinator.js";
import { HttpProblem, problemFor } from "./http-errors.js";
import { SECURITY_HEADERS, sendJson } from "./responses.js";
import { loadStaticFiles, type StaticFile } from "./static-files.js";

export interface Dashboard {
  /** http://host:port/ */
  url: string;
  /** Stops taking requests, ends live streams, waits for the rest up to the grace time. Idempotent. */
  stop(): Promise<void>;
}

export interface DashboardOptions {
  logger?: Logger;
}

const requests = metrics.counter("drover_dashboard_requests_total", "Requests to the run page and its API", [
  "route",
  "status",
]);

/**
 * The run page: static files, a JSON API over RunService and a Server-Sent Events stream fed by
 * WatchRun. It keeps no credential: each API request carries the operator's key (entered in the
 * page) and every gRPC call forwards it as the bearer token, so the coordinator's scopes decide
 * what the page may see and do.
 */
export async function startDashboard(
  config: DashboardConfig,
  options: DashboardOptions = {},
): Promise<Dashboard> {
  const logger = options.logger ?? createLogger("dashboard");
  const files = loadStaticFiles();
  const coordinator: Coordinator = {
    address: config.coordinatorAddress,
    client: createClient(RunService, config.coordinatorAddress, {
      credentials: channelCredentials(config.tls),
      metadata: () => injectTraceContext(),
    }),
  };
  const streams = new Set<AbortController>();

  const route = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<string> => {
    const file = req.method === "GET" ? files[path] : undefined;
    if (file) {
      sendFile(res, file);
      return "static";
    }
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" }).end("ok\n");
      return "healthz";
    }
    if (!path.startsWith("/api/")) throw new HttpProblem({ status: 404, message: "There is no such page." });
    return serveApi(coordinator, streams, req, res, path);
  };

  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    void withSpan(
      `${req.method} ${path.startsWith("/api/runs/") ? "/api/runs/:id" : path}`,
      { "http.request.method": req.method ?? "" },
      async (span) => {
        let name = "unknown";
        try {
          name = await route(req, res, path);
        } catch (err) {
          const problem = err instanceof HttpProblem ? err.problem : problemFor(err, coordinator.address);
          if (problem.status >= 500) logger.warn({ err, path }, "request failed");
          const extra = err instanceof HttpProblem ? err.extra : {};
          if (!res.headersSent) sendJson(res, problem.status, { error: problem.message, ...extra });
          else res.end();
        }
        span.setAttribute("http.response.status_code", res.statusCode);
        requests.inc({ route: name, status: res.statusCode });
      },
      { kind: SpanKind.SERVER },
    );
  });
  const url = await listen(server, config.address);
  logger.info({ url, coordinator: coordinator.address }, "dashboard listening");

  let stopped: Promise<void> | undefined;
  return {
    url,
    stop() {
      stopped ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        // Live streams would hold the server open for as long as their runs last.
        for (const s of streams) s.abort();
        server.closeIdleConnections();
        const grace = new Promise<void>((r) => setTimeout(r, config.shutdownGraceMs).unref());
        await Promise.race([closed, grace]);
        server.closeAllConnections();
        await closed;
        coordinator.client.close();
        logger.info("dashboard stopped");
      })();
      return stopped;
    },
  };
}

function sendFile(res: ServerResponse, file: StaticFile): void {
  res.writeHead(200, { ...SECURITY_HEADERS, "content-type": file.type, "cache-control": "no-cache" });
  res.end(file.body);
}

/** Listens on host:port (port 0 picks a free one) and says the page's URL. */
async function listen(server: Server, address: string): Promise<string> {
  const [host, port] = splitAddress(address);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.removeAllListeners("error");
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  return `http://${host}:${bound}/`;
}

function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  return [address.slice(0, i), Number(address.slice(i + 1))];
}
