import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { matchApiRoute } from "./api-routes.js";
import { type Dataset, ROW_KINDS } from "./dataset.js";
import { Faults } from "./faults.js";
import { tokenMinimum } from "./minimum.js";
import type { ResolvedOptions } from "./options.js";
import { RateLimiter } from "./rate-limit.js";
import { ResponseCache, requestKey } from "./response-cache.js";
import { StatsRecorder } from "./stats.js";
import { endpointCost } from "./token-costs.js";
import { kindTruth, type PartialTruth, TRUTH_KINDS, type TruthKind, type TruthKinds } from "./truth.js";
import { matchV2Route } from "./v2-routes.js";
import { roundEvents, WebhookHub } from "./webhooks.js";

type Headers = Record<string, string>;

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Headers = {}): void {
  sendJsonText(res, status, JSON.stringify(body), headers);
}

function sendJsonText(res: ServerResponse, status: number, text: string, headers: Headers = {}): void {
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

function sendText(
  res: ServerResponse,
  status: number,
  contentType: string,
  body: string,
  headers: Headers = {},
) {
  res.writeHead(status, {
    "content-type": contentType,
    "content-length": Buffer.byteLength(body),
    ...headers,
  });
  res.end(body);
}

function cloudflarePage(rayId: string): string {
  return `<!DOCTYPE html>
<html lang="en-US">
<head><title>Attention Required! | Cloudflare</title><meta charset="UTF-8" /></head>
<body>
<div id="cf-wrapper"><h1>Sorry, you have been blocked</h1>
<h2>You are unable to access api.pipedrive.com</h2>
<p>This website is using a security service to protect itself from online attacks.</p>
<p>Cloudflare Ray ID: <strong>${rayId}</strong></p></div>
</body>
</html>
`;
}

/** Wires the dataset, limits, faults and counters behind one node:http request handler. */
export class SandboxApp {
  readonly limiter: RateLimiter;
  readonly stats = new StatsRecorder();
  readonly webhooks: WebhookHub;
  private readonly faults: Faults;
  private readonly truthCache = new Map<TruthKind, TruthKinds[TruthKind]>();
  /** 256 MB: every page of a million-row account at 500 rows a page fits about twice over. */
  private readonly responses = new ResponseCache(256 * 1024 * 1024);
  private readonly timers = new Set<NodeJS.Timeout>();
  private rays = 0;
  private requests = 0;

  constructor(
    private readonly opts: ResolvedOptions,
    readonly dataset: Dataset,
    clock: () => number = Date.now,
  ) {
    this.limiter = new RateLimiter(opts, clock);
    this.faults = new Faults(opts);
    this.webhooks = new WebhookHub(opts.seed, opts.webhookTimeScale);
  }

  /**
   * Applies the mid-run change set (once), or with `again` another round of it; the truth is
   * recomputed to include it. `round` counts the rounds applied so far.
   */
  applyChanges(atMs = Date.now(), again = false): { applied: boolean; at: string; round: number } {
    const applied = this.dataset.applyChanges(atMs, again);
    if (applied) {
      this.truthCache.clear();
      this.responses.clear();
      this.webhooks.emit(roundEvents(this.dataset, this.dataset.changeRounds - 1, ROW_KINDS));
    }
    return {
      applied,
      at: new Date(this.dataset.changedAtMs ?? 0).toISOString(),
      round: this.dataset.changeRounds,
    };
  }

  truth<K extends TruthKind>(kinds: readonly K[]): PartialTruth<K> {
    const out: Partial<TruthKinds> = {};
    for (const kind of kinds) {
      let value = this.truthCache.get(kind);
      if (!value) {
        value = kindTruth(this.dataset, kind);
        this.truthCache.set(kind, value);
      }
      (out as Record<TruthKind, unknown>)[kind] = value;
    }
    return { seed: this.opts.seed, kinds: out as Pick<TruthKinds, K> };
  }

  createServer(): Server {
    const server = createServer((req, res) => {
      this.handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendJson(res, 500, { success: false, error: String(error) });
        else res.destroy();
      });
    });
    server.on("close", () => {
      for (const timer of this.timers) clearTimeout(timer);
      this.timers.clear();
      this.webhooks.close();
    });
    return server;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        resolve();
      }, ms);
      this.timers.add(timer);
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://sandbox");
    const segments = url.pathname.split("/").filter((s) => s.length > 0);
    const method = req.method ?? "GET";
    if (segments[0] === "v1") return this.handleApi(req, res, url, segments.slice(1), "v1");
    if (segments[0] === "api" && segments[1] === "v2")
      return this.handleApi(req, res, url, segments.slice(2), "v2");
    if (url.pathname === "/healthz") return sendJson(res, 200, { ok: true });
    if (segments[0] === "__sandbox") return this.handleControl(res, method, segments[1], url.searchParams);
    sendJson(res, 404, { success: false, error: "Not found" });
  }

  private handleControl(
    res: ServerResponse,
    method: string,
    action: string | undefined,
    query: URLSearchParams,
  ) {
    if (method === "GET" && action === "truth") {
      const requested = query.get("kind");
      if (requested === null) return sendJson(res, 200, this.truth(TRUTH_KINDS));
      const kinds = requested.split(",");
      const bad = kinds.filter((k) => !(TRUTH_KINDS as readonly string[]).includes(k));
      if (bad.length > 0) {
        return sendJson(res, 400, {
          error: `unknown kind ${bad.join(", ")}; use one of ${TRUTH_KINDS.join(", ")}`,
        });
      }
      return sendJson(res, 200, this.truth(kinds as TruthKind[]));
    }
    if (method === "GET" && action === "minimum") return sendJson(res, 200, tokenMinimum(this.dataset));
    if (method === "GET" && action === "stats") {
      return sendJson(res, 200, this.stats.snapshot(this.limiter.budgetRemaining, this.limiter.dayLog()));
    }
    if (method === "POST" && action === "faults") {
      const change: Record<string, number> = {};
      for (const key of ["latencyMs", "latencyJitterMs", "transientErrorRate"]) {
        const raw = query.get(key);
        if (raw !== null) change[key] = Number(raw);
      }
      try {
        return sendJson(res, 200, this.faults.update(change));
      } catch (err) {
        return sendJson(res, 400, { error: (err as Error).message });
      }
    }
    if (method === "POST" && action === "changes")
      return sendJson(res, 200, this.applyChanges(Date.now(), query.get("again") === "1"));
    if (method === "POST" && action === "reset-stats") {
      this.stats.reset();
      return sendJson(res, 200, { ok: true });
    }
    sendJson(res, 404, { error: "unknown sandbox endpoint" });
  }

  private tokenAccepted(token: string): boolean {
    if (token.length === 0) return false;
    return this.opts.tokens === null || this.opts.tokens.includes(token);
  }

  /**
   * `POST /v1/webhooks`, `GET /v1/webhooks`, `DELETE /v1/webhooks/:id` (webhooks.ts). Outside the
   * token limiter: their price is not in the sandbox's cost table, and a run calls them twice.
   */
  private async handleWebhooks(req: IncomingMessage, res: ServerResponse, segments: string[]) {
    const method = req.method ?? "GET";
    const send = (r: { status: number; body: unknown }) => sendJson(res, r.status, r.body);
    if (segments.length === 1 && method === "GET") return send(this.webhooks.list());
    if (segments.length === 2 && method === "DELETE") return send(this.webhooks.remove(segments[1] ?? ""));
    if (segments.length === 1 && method === "POST") {
      if (this.opts.webhooksRefused === 1)
        return sendJson(res, 403, { success: false, error: "This user is not allowed to create webhooks" });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of req as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_WEBHOOK_BODY_BYTES)
          return sendJson(res, 413, { success: false, error: "Payload too large" });
        chunks.push(chunk);
      }
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return sendJson(res, 400, { success: false, error: "The request body is not valid JSON" });
      }
      return send(this.webhooks.add(body));
    }
    sendJson(res, 404, { success: false, error: "Not found" });
  }

  private async handleApi(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    segments: string[],
    version: "v1" | "v2",
  ) {
    const header = req.headers["x-api-token"];
    const token = (Array.isArray(header) ? header[0] : header) || url.searchParams.get("api_token") || "";
    if (!this.tokenAccepted(token)) {
      this.stats.record(401, null, 0, false);
      return sendJson(res, 401, { success: false, error: "unauthorized" });
    }
    if (version === "v1" && segments[0] === "webhooks") return this.handleWebhooks(req, res, segments);
    this.requests++;
    if (this.opts.changesAfterRequests > 0 && this.requests >= this.opts.changesAfterRequests)
      this.applyChanges();
    const match = version === "v1" ? matchApiRoute : matchV2Route;
    const route = match(this.dataset, req.method ?? "GET", segments, url.searchParams);
    const cost = endpointCost(route.endpoint);
    const admission = this.limiter.admit(token, cost);

    if (admission.outcome === "blocked") {
      this.stats.record(403, route.callType, 0, false, route.endpoint);
      const ray = `${(this.rays++).toString(16).padStart(8, "0")}a1b2c3d4-AMS`;
      return sendText(res, 403, "text/html; charset=UTF-8", cloudflarePage(ray), {
        server: "cloudflare",
        "cf-ray": ray,
      });
    }
    if (admission.outcome !== "ok") {
      this.stats.record(429, route.callType, 0, false, route.endpoint);
      if (admission.outcome === "daily") return sendJson(res, 429, dailyLimitBody(), admission.headers);
      return sendJson(
        res,
        429,
        { success: false, error: "Request over limit", errorCode: 429 },
        admission.headers,
      );
    }

    const plan = this.faults.next();
    if (plan.delayMs > 0) await this.sleep(plan.delayMs);
    if (plan.transient) {
      this.limiter.refund(cost, token);
      this.stats.record(plan.transient.status, route.callType, 0, true, route.endpoint);
      const { status, contentType, body } = plan.transient;
      return sendText(res, status, contentType, body, this.limiter.headersFor(token));
    }
    let result: { status: number; text: string };
    try {
      // A path the API does not know is not worth keeping (anyone can ask for any number of them).
      const render = () => {
        const { status, body } = route.run();
        return { status, text: JSON.stringify(body) };
      };
      result =
        route.callType === null
          ? render()
          : this.responses.answer(requestKey(req.method ?? "GET", url), route.run);
    } catch (error) {
      this.limiter.refund(cost, token);
      throw error;
    }
    this.stats.record(result.status, route.callType, cost, false, route.endpoint);
    sendJsonText(res, result.status, result.text, admission.headers);
  }
}

/** Largest webhook-management body read; a subscription is a few hundred bytes. */
const MAX_WEBHOOK_BODY_BYTES = 64 * 1024;

/**
 * A daily 429's body: Pipedrive's error envelope (success, error, error_info, data, additional_data,
 * code), saying that the company's daily token budget is spent and not when it returns: Pipedrive
 * documents only "midnight at server's timezone", which "may not be aligned" with the customer's
 * (pipedrive.readme.io/docs/core-api-concepts-rate-limiting). Its headers describe the burst window.
 */
export function dailyLimitBody(): Record<string, unknown> {
  return {
    success: false,
    error: "Daily API token budget reached",
    error_info: "Please check developers.pipedrive.com for more information about Pipedrive API.",
    data: null,
    additional_data: null,
    code: "daily_api_token_budget_reached",
  };
}
