import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { Dataset } from "./dataset.js";
import { type Answer, badRequest, errorAnswer, notFound, unknownType } from "./errors.js";
import { isObjectType, type ObjectType } from "./object-types.js";
import { batchRead, list, search } from "./objects-api.js";
import type { ResolvedOptions } from "./options.js";
import { RateLimiter, refusalBody } from "./rate-limit.js";
import { associations, propertiesOf } from "./schema-api.js";
import { truthOf } from "./truth.js";

/** What the routes need from one request. */
interface Call {
  method: string;
  segments: string[];
  query: URLSearchParams;
  body: unknown;
}

/** The request counts a test or a benchmark judges a client by. */
export interface Stats {
  requests: number;
  byStatus: Record<string, number>;
  /** API requests the limits let through, and when the first and last of them came (epoch ms). */
  admitted: number;
  firstAdmittedAt?: number;
  lastAdmittedAt?: number;
  /** Requests admitted in each second since the first: where a client left the window unused. */
  admittedBySecond: number[];
  /** Requests admitted by what they asked: list, search, batch-read, associations, properties. */
  admittedByCall: Record<string, number>;
}

/** What an API request asks, for the stats: the endpoint's family, not its type. */
function callOf(method: string, segments: readonly string[]): string {
  const [, version, area, , ...rest] = segments;
  if (version === "v4" && area === "associations") return "associations";
  if (area === "properties") return "properties";
  if (method === "POST" && rest.at(-1) === "search") return "search";
  if (method === "POST" && rest.join("/") === "batch/read") return "batch-read";
  if (method === "GET" && rest.length === 0) return "list";
  return "other";
}

const MAX_BODY_BYTES = 1024 * 1024;

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json;charset=utf-8",
    "content-length": Buffer.byteLength(text),
    // Every HubSpot answer names its request for support (seen on search answers, which have no other).
    "x-hubspot-correlation-id": randomUUID(),
    ...headers,
  });
  res.end(text);
}

/** Wires the dataset and the limits behind one node:http handler. */
export class HubSpotApp {
  readonly dataset: Dataset;
  readonly limiter: RateLimiter;
  stats: Stats = { requests: 0, byStatus: {}, admitted: 0, admittedBySecond: [], admittedByCall: {} };
  private apiRequests = 0;
  private autoChangesApplied = false;

  constructor(
    private readonly opts: ResolvedOptions,
    clock: () => number = Date.now,
  ) {
    this.dataset = new Dataset(opts);
    this.limiter = new RateLimiter(opts, clock);
  }

  createServer(baseUrl: () => string): Server {
    // Node refuses request lines past its header limit with a 431 of its own; the 414 is the sandbox's to give.
    const server = createServer({ maxHeaderSize: 4 * 1024 * 1024 }, (req, res) => {
      this.handle(req, res, baseUrl()).catch((error: unknown) => {
        if (!res.headersSent) send(res, 500, errorAnswer(500, "INTERNAL_ERROR", String(error)).body);
        else res.destroy();
      });
    });
    return server;
  }

  private count(status: number): void {
    this.stats.requests++;
    this.stats.byStatus[status] = (this.stats.byStatus[status] ?? 0) + 1;
  }

  private async handle(req: IncomingMessage, res: ServerResponse, baseUrl: string): Promise<void> {
    const rawUrl = req.url ?? "/";
    const url = new URL(rawUrl, "http://sandbox");
    const segments = url.pathname.split("/").filter((s) => s.length > 0);
    const method = req.method ?? "GET";
    if (url.pathname === "/healthz") return send(res, 200, { ok: true });
    if (segments[0] === "__sandbox") return this.control(res, method, segments[1]);
    if (segments[0] !== "crm") return send(res, 404, notFound().body);
    if (rawUrl.length > this.opts.maxUrlLength) {
      this.count(414);
      // HubSpot documents neither the limit nor the answer's body: the status alone is modelled.
      res.writeHead(414, { "content-length": 0 });
      return void res.end();
    }
    const token = this.token(req);
    if (token === null) {
      this.count(401);
      return send(
        res,
        401,
        errorAnswer(
          401,
          "INVALID_AUTHENTICATION",
          "Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview",
        ).body,
      );
    }
    const body = method === "POST" ? await readJson(req) : undefined;
    if (body instanceof Error) return send(res, 400, badRequest(body.message).body);
    this.apiRequests++;
    if (
      this.opts.changesAfterRequests > 0 &&
      !this.autoChangesApplied &&
      this.apiRequests >= this.opts.changesAfterRequests
    ) {
      this.autoChangesApplied = true;
      this.dataset.applyChanges(Date.now());
    }
    const isSearch = method === "POST" && segments.at(-1) === "search";
    const admission = this.limiter.admit(token, isSearch);
    // Search answers carry no X-HubSpot-RateLimit-* headers, only X-HubSpot-Correlation-Id (reported in
    // HubSpot's community under the changelog "Rate limit headers will now appear for OAuth
    // authenticated calls"; the brief of issue 35 cites the search guide's Limitations for it).
    const limitHeaders = isSearch ? {} : this.limiter.headers(token);
    if (!admission.ok) {
      this.count(429);
      return send(res, 429, refusalBody(admission.policy), limitHeaders);
    }
    const now = Date.now();
    this.stats.admitted++;
    const call = callOf(method, segments);
    this.stats.admittedByCall[call] = (this.stats.admittedByCall[call] ?? 0) + 1;
    this.stats.firstAdmittedAt ??= now;
    this.stats.lastAdmittedAt = now;
    const second = Math.floor((now - this.stats.firstAdmittedAt) / 1000);
    const bySecond = this.stats.admittedBySecond;
    while (bySecond.length <= second) bySecond.push(0);
    bySecond[second] = (bySecond[second] ?? 0) + 1;
    if (this.opts.latencyMs > 0) await new Promise((r) => setTimeout(r, this.opts.latencyMs));
    const answer = this.route({ method, segments, query: url.searchParams, body }, baseUrl);
    this.count(answer.status);
    send(res, answer.status, answer.body, limitHeaders);
  }

  /** The request's bearer token when the account accepts it, else null. */
  private token(req: IncomingMessage): string | null {
    const header = req.headers.authorization ?? "";
    const token = header.startsWith("Bearer ") ? header.slice(7).trim() : "";
    if (token.length === 0) return null;
    return this.opts.tokens === null || this.opts.tokens.includes(token) ? token : null;
  }

  private route(call: Call, baseUrl: string): Answer {
    const [, version, area, typeName, ...rest] = call.segments;
    const type = (name: string | undefined): ObjectType | null => (name && isObjectType(name) ? name : null);
    if (version === "v3" && area === "objects") {
      const t = type(typeName);
      if (t === null) return unknownType(typeName ?? "");
      if (call.method === "GET" && rest.length === 0) return list(this.dataset, t, call.query, baseUrl);
      if (call.method === "POST" && rest.join("/") === "batch/read")
        return batchRead(this.dataset, t, call.body, call.query);
      if (call.method === "POST" && rest.join("/") === "search") return search(this.dataset, t, call.body);
    }
    if (version === "v3" && area === "properties" && call.method === "GET" && rest.length === 0) {
      const t = type(typeName);
      return t === null ? unknownType(typeName ?? "") : propertiesOf(this.dataset, t);
    }
    if (
      version === "v4" &&
      area === "associations" &&
      call.method === "POST" &&
      rest.join("/").endsWith("batch/read")
    ) {
      const from = type(typeName);
      const to = type(rest[0]);
      if (rest.length === 3 && from === null) return unknownType(typeName ?? "");
      if (rest.length === 3 && to === null) return unknownType(rest[0] ?? "");
      if (from !== null && to !== null && rest.length === 3)
        return associations(this.dataset, from, to, call.body);
    }
    return notFound();
  }

  private control(res: ServerResponse, method: string, action: string | undefined): void {
    if (method === "POST" && action === "changes") send(res, 200, this.dataset.applyChanges(Date.now()));
    else if (method === "GET" && action === "truth") send(res, 200, truthOf(this.dataset));
    else if (method === "GET" && action === "stats")
      send(res, 200, { ...this.stats, refusals: this.limiter.refusals });
    else if (method === "POST" && action === "reset-stats") {
      this.stats = { requests: 0, byStatus: {}, admitted: 0, admittedBySecond: [], admittedByCall: {} };
      this.limiter.refusals = { TEN_SECONDLY_ROLLING: 0, DAILY: 0, SECONDLY: 0 };
      send(res, 200, { ok: true });
    } else send(res, 404, { error: "unknown sandbox endpoint" });
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return new Error("request body too large");
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.length === 0) return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return new Error("Invalid input JSON: the request body is not valid JSON");
  }
}
