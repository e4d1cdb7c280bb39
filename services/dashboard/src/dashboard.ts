import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { channelCredentials, MAX_TOKEN_LENGTH } from "@drover/auth";
import {
  type Client,
  Code,
  createClient,
  isRpcError,
  LIVE_RUN_STATUSES,
  RUN_STATUSES,
  RunService,
  runStatusFromName,
} from "@drover/proto";
import {
  createLogger,
  injectTraceContext,
  type Logger,
  metrics,
  SpanKind,
  withSpan,
} from "@drover/telemetry";
import type { DashboardConfig } from "./config.js";
import { type Problem, problemFor } from "./http-errors.js";
import { auditEventJson, noteGroupJson, runJson, throughputJson } from "./run-json.js";

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
const liveStreams = metrics.gauge("drover_dashboard_live_streams", "Pages following a run live (WatchRun)");

const STATIC: Record<string, { file: string; type: string }> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
};

// The page is scripts and styles of its own and JSON from this origin: nothing inline, nothing
// from elsewhere, so an injected string could neither run nor phone home.
const SECURITY_HEADERS = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

const RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * A live page's grouped reasons are read again when the run's skipped or failed rows changed,
 * at most this often (ListNotes groups every note of the run: not a call for every update).
 */
const NOTES_EVERY_MS = 1_000;
const CALL_DEADLINE_MS = 15_000;
const KEEP_ALIVE_MS = 15_000;

class HttpProblem extends Error {
  constructor(
    readonly problem: Problem,
    /** More for the page than a sentence, e.g. the runs a refused revert names. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(problem.message);
  }
}

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
  const files: Record<string, { body: Buffer | string; type: string }> = Object.fromEntries(
    Object.entries(STATIC).map(([path, f]) => [
      path,
      { body: readFileSync(new URL(`../static/${f.file}`, import.meta.url)), type: f.type },
    ]),
  );
  // The page's status words come from the one definition every other layer reads, not a copy in
  // app.js: a script of this origin (the CSP allows no inline script), loaded before app.js.
  files["/vocabulary.js"] = {
    body: `window.DROVER_VOCABULARY = Object.freeze(${JSON.stringify({
      runStatuses: RUN_STATUSES,
      liveRunStatuses: LIVE_RUN_STATUSES,
    })});\n`,
    type: "text/javascript; charset=utf-8",
  };
  const coordinator = config.coordinatorAddress;
  const client: Client<typeof RunService> = createClient(RunService, coordinator, {
    credentials: channelCredentials(config.tls),
    metadata: () => injectTraceContext(),
  });
  const streams = new Set<AbortController>();

  const callOptions = (token: string, signal?: AbortSignal) => ({
    metadata: { authorization: `Bearer ${token}` },
    deadline: new Date(Date.now() + CALL_DEADLINE_MS),
    ...(signal ? { signal } : {}),
  });

  const route = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<string> => {
    const file = req.method === "GET" ? files[path] : undefined;
    if (file) {
      res.writeHead(200, { ...SECURITY_HEADERS, "content-type": file.type, "cache-control": "no-cache" });
      res.end(file.body);
      return "static";
    }
    if (path === "/healthz") {
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" }).end("ok\n");
      return "healthz";
    }
    if (!path.startsWith("/api/")) throw new HttpProblem({ status: 404, message: "There is no such page." });

    const token = bearerToken(req);
    const url = new URL(req.url ?? "/", "http://dashboard");
    if (req.method === "GET" && path === "/api/runs") {
      const status = url.searchParams.get("status") ?? "";
      if (status && runStatusFromName(status) === undefined)
        throw new HttpProblem({ status: 400, message: `There is no run status "${status.slice(0, 20)}".` });
      const tenantId = (url.searchParams.get("tenant") ?? "").slice(0, 128);
      const { runs } = await client.listRuns(
        { tenantId, statuses: status ? [runStatusFromName(status)!] : [], pageSize: 100 },
        callOptions(token),
      );
      sendJson(res, 200, { runs: runs.map(runJson) });
      return "runs";
    }
    const match = /^\/api\/runs\/([^/]+)(?:\/(events|throughput|history|stop|resume|retry|revert))?$/.exec(
      path,
    );
    if (!match) throw new HttpProblem({ status: 404, message: "There is no such API." });
    const runId = decodeURIComponent(match[1]!);
    if (!RUN_ID.test(runId)) throw new HttpProblem({ status: 404, message: "There is no run with that id." });
    const action = match[2];
    if (req.method === "GET" && action === undefined) {
      const [{ run }, { groups }] = await Promise.all([
        client.getRun({ runId }, callOptions(token)),
        client.listNotes({ runId, samples: 5 }, callOptions(token)),
      ]);
      sendJson(res, 200, { run: runJson(run!), notes: groups.map(noteGroupJson) });
      return "run";
    }
    if (req.method === "GET" && action === "throughput") {
      const res2 = await client.getThroughput({ runId, buckets: 120 }, callOptions(token));
      sendJson(res, 200, throughputJson(res2));
      return "throughput";
    }
    if (req.method === "GET" && action === "history") {
      // The run's audit events, newest first: who started, stopped, retried or reverted it (and
      // who tried and was refused). A key that may read the run may read its history.
      const { events } = await client.listAuditEvents({ runId, pageSize: 100 }, callOptions(token));
      sendJson(res, 200, { events: events.map(auditEventJson) });
      return "history";
    }
    if (req.method === "GET" && action === "events") {
      await streamRun(res, runId, token);
      return "events";
    }
    if (req.method === "POST" && action === "revert") {
      // The "Revert this run" action: refused (409) while other runs' records depend on what this
      // one created, naming those runs for the page to link, unless force is asked for.
      try {
        const { run } = await client.revertRun(
          { runId, force: url.searchParams.get("force") === "1" },
          callOptions(token),
        );
        sendJson(res, 200, { run: runJson(run!) });
      } catch (err) {
        if (!isRpcError(err, Code.FAILED_PRECONDITION)) throw err;
        const runIds = (err.details.run_ids ?? "").split(",").filter((id) => RUN_ID.test(id));
        const revertedBy = RUN_ID.test(err.details.reverted_by ?? "") ? err.details.reverted_by : undefined;
        throw new HttpProblem(problemFor(err, coordinator), {
          ...(runIds.length > 0 ? { runIds } : {}),
          ...(revertedBy ? { revertedBy } : {}),
        });
      }
      return "revert";
    }
    if (
      req.method === "POST" &&
      action &&
      action !== "events" &&
      action !== "throughput" &&
      action !== "history"
    ) {
      // A retry with `kind`, `reason` or `id` (repeated) in the query is a re-drive of those rows
      // (the "retry these" button of a reason group); the coordinator checks the filter.
      const { run } =
        action === "stop"
          ? await client.stopRun({ runId }, callOptions(token))
          : action === "resume"
            ? await client.resumeRun({ runId }, callOptions(token))
            : await client.retryRun(
                {
                  runId,
                  kind: url.searchParams.get("kind") ?? "",
                  reason: url.searchParams.get("reason") ?? "",
                  sourceIds: url.searchParams.getAll("id"),
                },
                callOptions(token),
              );
      sendJson(res, 200, { run: runJson(run!) });
      return action;
    }
    throw new HttpProblem({ status: 405, message: `${req.method} is not allowed here.` });
  };

  /**
   * Server-Sent Events: `run` for every WatchRun update, `notes` when the grouped reasons change,
   * `problem` (a sentence) if the stream fails, and `end` when the run has finished.
   */
  const streamRun = async (res: ServerResponse, runId: string, token: string) => {
    // Asked first, so that an unknown key or someone else's run is a plain HTTP refusal (the page
    // shows the key form again) rather than an event on a stream already answered 200.
    await client.getRun({ runId }, callOptions(token));
    const abort = new AbortController();
    streams.add(abort);
    liveStreams.inc({});
    // The response closes when the page goes away (or the stream ends): the watch ends with it.
    res.on("close", () => abort.abort());
    res.writeHead(200, {
      ...SECURITY_HEADERS,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    const send = (event: string, data: unknown) => {
      if (!res.writableEnded) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    };
    // WatchRun says nothing while a run waits (parked on a 429, say); proxies close a silent
    // connection, so a comment line goes out now and then.
    const keepAlive = setInterval(() => {
      if (!res.writableEnded) res.write(": keep-alive\n\n");
    }, KEEP_ALIVE_MS);
    let lastNotes = "";
    let lastNoted = -1;
    let notesAt = 0;
    const sendNotes = async () => {
      notesAt = Date.now();
      const { groups } = await client.listNotes({ runId, samples: 5 }, callOptions(token, abort.signal));
      const json = groups.map(noteGroupJson);
      const digest = JSON.stringify(json);
      if (digest !== lastNotes) {
        lastNotes = digest;
        send("notes", json);
      }
    };
    try {
      // A watch has no deadline: it lasts as long as the run or the page.
      for await (const update of client.watchRun(
        { runId },
        { metadata: { authorization: `Bearer ${token}` }, signal: abort.signal },
      )) {
        const view = runJson(update.run!);
        send("run", view);
        const noted = view.progress.reduce((n, p) => n + p.skipped + p.failed, 0);
        if (noted !== lastNoted && Date.now() - notesAt >= NOTES_EVERY_MS) {
          lastNoted = noted;
          await sendNotes();
        }
      }
      await sendNotes();
      send("end", {});
    } catch (err) {
      if (!abort.signal.aborted) send("problem", { message: problemFor(err, coordinator).message });
    } finally {
      clearInterval(keepAlive);
      streams.delete(abort);
      liveStreams.dec({});
      res.end();
    }
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
          const problem = err instanceof HttpProblem ? err.problem : problemFor(err, coordinator);
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
  const [host, port] = splitAddress(config.address);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.removeAllListeners("error");
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const url = `http://${host}:${bound}/`;
  logger.info({ url, coordinator }, "dashboard listening");

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
        client.close();
        logger.info("dashboard stopped");
      })();
      return stopped;
    },
  };
}

function bearerToken(req: IncomingMessage): string {
  const header = req.headers.authorization ?? "";
  const token = /^Bearer (\S+)$/.exec(header)?.[1];
  if (!token) {
    throw new HttpProblem({
      status: 401,
      message: "Enter an API key: every call to the coordinator needs one.",
    });
  }
  if (token.length > MAX_TOKEN_LENGTH)
    throw new HttpProblem({ status: 401, message: "That API key is too long to be one of Drover's keys." });
  return token;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
  });
  res.end(JSON.stringify(body));
}

function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  return [address.slice(0, i), Number(address.slice(i + 1))];
}
