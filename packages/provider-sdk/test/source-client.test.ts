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

describe("a wall that goes up after slots were handed out", () => {
  it("takes back every slot before the wall: no call reaches the source before the wall's end", async () => {
    const sentAt: number[] = [];
    let refused = false;
    handler = (req, res) => {
      sentAt.push(Date.now());
      if (req.url === "/refused" && !refused) {
        refused = true;
        res.writeHead(429, { "retry-after": "1" });
      }
      res.end("{}");
    };
    const c = client({ pacer: new HeaderBudgetPacer() });
    const slots = await c.reserve(5, "get");
    const err = await c.getJson("/refused").catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    const wallEnd = (err as RateLimitedError).retryAt.getTime();
    sentAt.length = 0;
    await Promise.all(slots.map((slot, i) => c.getJson(`/held/${i}`, {}, "get", undefined, { slot })));
    expect(sentAt).toHaveLength(5);
    expect(sentAt.filter((t) => t < wallEnd)).toEqual([]);
  });

  it("keeps a later answer's burst window from lowering the wall", async () => {
    let calls = 0;
    handler = (_req, res) => {
      calls++;
      res.end("{}");
    };
    const pacer = new HeaderBudgetPacer();
    const wallEnd = Date.now() + 800;
    pacer.absorb({ status: 429, cost: 1, reading: { blockedUntil: wallEnd } });
    // An answer to a call that was already on its way when the wall went up.
    pacer.absorb({ status: 200, cost: 1, reading: { burstRemaining: 50, burstResetAt: Date.now() } });
    await client({ pacer }).getJson("/after");
    expect(Date.now()).toBeGreaterThanOrEqual(wallEnd);
    expect(calls).toBe(1);
  });
});

describe("an edge's block page", () => {
  it("lasts as long as the account's known wall, not the adapter's flat fallback", async () => {
    let answerHeld: (() => void) | undefined;
    handler = (req, res) => {
      if (req.url === "/in-flight") {
        // Answered only after the 429 below: a call that was on its way when the wall went up.
        answerHeld = () => {
          res.writeHead(403, { "content-type": "text/html" });
          res.end("<title>please slow down</title>");
        };
        return;
      }
      res.writeHead(429, { "retry-after": "5" });
      res.end("{}");
    };
    const c = client({ pacer: new HeaderBudgetPacer() });
    const inFlight = c.getJson("/in-flight").catch((e) => e);
    await expect.poll(() => answerHeld).toBeDefined();
    const refused = (await c.getJson("/refused").catch((e) => e)) as RateLimitedError;
    expect(refused).toBeInstanceOf(RateLimitedError);
    answerHeld!();
    const blocked = await inFlight;
    expect(blocked).toBeInstanceOf(RateLimitedError);
    // The wall the 429 stated (5 s), not the adapter's flat minute.
    expect((blocked as RateLimitedError).retryAt.getTime()).toBe(refused.retryAt.getTime());
  });
});
