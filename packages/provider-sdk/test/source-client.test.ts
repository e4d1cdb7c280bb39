import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HeaderBudgetPacer,
  PermanentError,
  RateLimitedError,
  SourceClient,
  TransientError,
} from "../src/index.js";
import { testAdapter } from "./test-adapter.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
let handler: Handler = (_req, res) => res.end("{}");
let server: Server;
let baseUrl: string;

beforeAll(async () => {
  server = createServer((req, res) => handler(req, res));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const client = (extra: Partial<ConstructorParameters<typeof SourceClient>[0]> = {}) =>
  new SourceClient({ baseUrl, apiToken: "secret-token", adapter: testAdapter, ...extra });

describe("source client", () => {
  it("sends the token in the adapter's header, never in the URL", async () => {
    let seen: { url?: string; token?: string | string[] } = {};
    handler = (req, res) => {
      seen = { url: req.url, token: req.headers.authorization };
      res.end('{"data":[]}');
    };
    await client().getJson("/v1/persons", { start: 0, limit: 10 });
    expect(seen.token).toBe("Bearer secret-token");
    expect(seen.url).toBe("/v1/persons?start=0&limit=10");
  });

  it("classifies a 429 as rate limited until the instant the adapter read from it", async () => {
    handler = (_req, res) => {
      res.writeHead(429, { "retry-after": "7" });
      res.end('{"success":false}');
    };
    const before = Date.now();
    const err = await client()
      .getJson("/v1/deals")
      .catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.getTime()).toBeGreaterThanOrEqual(before + 7_000);
  });

  it("classifies 5xx and garbled bodies as transient, other 4xx as permanent", async () => {
    handler = (_req, res) => {
      res.writeHead(503);
      res.end("<html>bad gateway</html>");
    };
    await expect(client().getJson("/x")).rejects.toBeInstanceOf(TransientError);
    handler = (_req, res) => res.end('{"data": [1, 2');
    await expect(client().getJson("/x")).rejects.toBeInstanceOf(TransientError);
    handler = (_req, res) => {
      res.writeHead(404);
      res.end('{"error":"not found"}');
    };
    await expect(client().getJson("/x")).rejects.toBeInstanceOf(PermanentError);
  });

  it("treats a refusal the adapter calls throttling as rate limiting, not as a permission problem", async () => {
    handler = (_req, res) => {
      res.writeHead(403, { "content-type": "text/html" });
      res.end("<title>please slow down</title>");
    };
    const before = Date.now();
    const err = await client()
      .getJson("/x")
      .catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.getTime()).toBeGreaterThanOrEqual(before + 60_000);
    handler = (_req, res) => {
      res.writeHead(403);
      res.end("forbidden");
    };
    await expect(client().getJson("/x")).rejects.toBeInstanceOf(PermanentError);
  });

  it("tells the pacer what each answer cost and what the adapter read from it", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "ratelimit-remaining": "3", "ratelimit-reset": "2" });
      res.end("{}");
    };
    const seen: unknown[] = [];
    const asked: number[] = [];
    const pacer = {
      graceMs: Number.POSITIVE_INFINITY,
      acquire: async (cost: number, _signal?: AbortSignal, count = 1) => {
        asked.push(cost);
        return Array.from({ length: count }, () => Date.now());
      },
      absorb: (answer: unknown) => seen.push(answer),
    };
    const before = Date.now();
    await client({ pacer }).getJson("/x", {}, "list");
    expect(asked).toEqual([10]);
    expect(seen).toEqual([
      {
        status: 200,
        cost: 10,
        reading: { burstRemaining: 3, burstResetAt: expect.any(Number) },
      },
    ]);
    const reading = (seen[0] as { reading: { burstResetAt: number } }).reading;
    expect(reading.burstResetAt).toBeGreaterThanOrEqual(before + 2_000);
  });

  it("refuses a response larger than its limit", async () => {
    handler = (_req, res) => res.end(JSON.stringify({ data: "x".repeat(5_000) }));
    await expect(client({ maxResponseBytes: 1_000 }).getJson("/x")).rejects.toBeInstanceOf(PermanentError);
  });

  it("holds the process's other calls to the account until a refusal's reset", async () => {
    let calls = 0;
    handler = (_req, res) => {
      calls++;
      if (calls === 1) res.writeHead(429, { "retry-after": "1" });
      res.end("{}");
    };
    const c = client({ pacer: new HeaderBudgetPacer() });
    await expect(c.getJson("/a")).rejects.toBeInstanceOf(RateLimitedError);
    const started = Date.now();
    await c.getJson("/b");
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(calls).toBe(2);
  });

  it("waits for the burst window's reset once the headers say nothing remains", async () => {
    let calls = 0;
    handler = (_req, res) => {
      calls++;
      res.writeHead(200, { "ratelimit-remaining": calls === 1 ? "0" : "5", "ratelimit-reset": "1" });
      res.end("{}");
    };
    const c = client({ pacer: new HeaderBudgetPacer() });
    await c.getJson("/a");
    const started = Date.now();
    await c.getJson("/b");
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(calls).toBe(2);
  });
});
