import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HeaderPacer, PermanentError, RateLimitedError, SourceClient, TransientError } from "../src/index.js";

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
  new SourceClient({ baseUrl, apiToken: "secret-token", ...extra });

describe("source client", () => {
  it("sends the token in a header, never in the URL", async () => {
    let seen: { url?: string; token?: string | string[] } = {};
    handler = (req, res) => {
      seen = { url: req.url, token: req.headers["x-api-token"] };
      res.end('{"data":[]}');
    };
    await client().getJson("/v1/persons", { start: 0, limit: 10 });
    expect(seen.token).toBe("secret-token");
    expect(seen.url).toBe("/v1/persons?start=0&limit=10");
  });

  it("classifies a 429 as rate limited until the reset the source gave", async () => {
    handler = (_req, res) => {
      res.writeHead(429, { "x-ratelimit-reset": "7" });
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

  it("treats the edge's 403 block page as rate limiting, not as a permission problem", async () => {
    handler = (_req, res) => {
      res.writeHead(403, { "content-type": "text/html" });
      res.end("<title>Attention Required! | Cloudflare</title>");
    };
    await expect(client().getJson("/x")).rejects.toBeInstanceOf(RateLimitedError);
  });

  it("refuses a response larger than its limit", async () => {
    handler = (_req, res) => res.end(JSON.stringify({ data: "x".repeat(5_000) }));
    await expect(client({ maxResponseBytes: 1_000 }).getJson("/x")).rejects.toBeInstanceOf(PermanentError);
  });

  it("waits for the burst window's reset once the headers say nothing remains", async () => {
    let calls = 0;
    handler = (_req, res) => {
      calls++;
      res.writeHead(200, { "x-ratelimit-remaining": calls === 1 ? "0" : "5", "x-ratelimit-reset": "1" });
      res.end("{}");
    };
    const c = client({ pacer: new HeaderPacer() });
    await c.getJson("/a");
    const started = Date.now();
    await c.getJson("/b");
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(calls).toBe(2);
  });
});
