import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  type BudgetPacer,
  HeaderBudgetPacer,
  type PacedAnswer,
  RateLimitedError,
  SourceClient,
  TransientError,
} from "../src/index.js";
import { testAdapter } from "./test-adapter.js";

/**
 * A transient failure of a GET is sent again by the source client, within the task's attempt, so
 * that one 5xx costs one request and not the task's work (issue 20). Against a real HTTP server.
 */

type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => void;
let handler: Handler = (_req, res) => res.end("{}");
let server: Server;
let baseUrl: string;
/** Every request the server received, in order, with the instant it arrived. */
let received: { url: string; at: number }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    received.push({ url: req.url ?? "", at: Date.now() });
    handler(req, res, received.length);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
beforeEach(() => {
  received = [];
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

/** Answers `status` with a gateway's HTML page, as a proxy in front of the API does. */
const gatewayError = (res: ServerResponse, status = 503) => {
  res.writeHead(status, { "content-type": "text/html" });
  res.end(`<html><title>${status}</title></html>`);
};

/** A pacer that hands out every slot at once and counts what it was asked and told. */
class CountingPacer implements BudgetPacer {
  readonly graceMs = Number.POSITIVE_INFINITY;
  acquired = 0;
  readonly absorbed: PacedAnswer[] = [];
  async acquire(_cost: number, _signal?: AbortSignal, count = 1): Promise<number[]> {
    this.acquired += count;
    return Array.from({ length: count }, () => Date.now());
  }
  absorb(answer: PacedAnswer): void {
    this.absorbed.push(answer);
  }
}

const client = (extra: Partial<ConstructorParameters<typeof SourceClient>[0]> = {}) =>
  new SourceClient({
    baseUrl,
    apiToken: "secret-token",
    adapter: testAdapter,
    resendBackoffMs: 20,
    ...extra,
  });

describe("a GET that fails transiently is sent again by the client", () => {
  it("costs two requests and succeeds when a 503 is followed by a 200", async () => {
    handler = (_req, res, n) => (n === 1 ? gatewayError(res) : res.end('{"data":[1]}'));
    await expect(client().getJson("/v1/deals/1/mailMessages")).resolves.toEqual({ data: [1] });
    expect(received.map((r) => r.url)).toEqual(["/v1/deals/1/mailMessages", "/v1/deals/1/mailMessages"]);
  });

  it("gives up as transient after three 5xx in a row: the task's attempt then takes over", async () => {
    handler = (_req, res, n) => gatewayError(res, n % 2 === 0 ? 502 : 503);
    const err = await client()
      .getJson("/v1/deals")
      .catch((e) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as TransientError).message).toMatch(/answered 503/);
    expect(received).toHaveLength(3);
  });

  it("sends as many times as `resends` allows and no more", async () => {
    handler = (_req, res) => gatewayError(res);
    await expect(client({ resends: 0 }).getJson("/x")).rejects.toBeInstanceOf(TransientError);
    expect(received).toHaveLength(1);
  });

  it("does not resend a 429: the rate limit reaches the task, which parks until the reset", async () => {
    handler = (_req, res) => {
      res.writeHead(429, { "retry-after": "3" });
      res.end('{"success":false}');
    };
    await expect(client().getJson("/v1/deals")).rejects.toBeInstanceOf(RateLimitedError);
    expect(received).toHaveLength(1);
  });

  it("does not resend a permanent 4xx", async () => {
    handler = (_req, res) => {
      res.writeHead(404);
      res.end('{"error":"not found"}');
    };
    await expect(client().getJson("/v1/deals/9")).rejects.toThrow(/404/);
    expect(received).toHaveLength(1);
  });

  it("takes a budget slot from the pacer for each resend, and tells it of each answer", async () => {
    handler = (_req, res, n) => (n === 1 ? gatewayError(res) : res.end("{}"));
    const pacer = new CountingPacer();
    await client({ pacer }).getJson("/v1/mailbox/mailMessages/7", {}, "get");
    expect(pacer.acquired).toBe(2);
    expect(pacer.absorbed.map((a) => a.status)).toEqual([503, 200]);
  });

  it("uses a slot the caller reserved for the first try only; the resend takes its own", async () => {
    handler = (_req, res, n) => (n === 1 ? gatewayError(res) : res.end("{}"));
    const pacer = new CountingPacer();
    const c = client({ pacer });
    const [slot] = await c.reserve(1, "get");
    expect(pacer.acquired).toBe(1);
    await c.getJson("/v1/mailbox/mailMessages/7", {}, "get", undefined, { slot });
    expect(pacer.acquired).toBe(2);
  });

  it("never sends the resend before a wall that went up meanwhile (another call's 429)", async () => {
    const pacer = new HeaderBudgetPacer();
    let wallEnd = 0;
    handler = (_req, res, n) => {
      if (n === 1) {
        // While this call was on its way, another task of the process met a 429.
        wallEnd = Date.now() + 700;
        pacer.absorb({ status: 429, cost: 1, reading: { blockedUntil: wallEnd } });
        return gatewayError(res);
      }
      res.end("{}");
    };
    await client({ pacer }).getJson("/v1/deals");
    expect(received).toHaveLength(2);
    expect(received[1]!.at).toBeGreaterThanOrEqual(wallEnd);
  });

  it("resends after the connection dropped without an answer", async () => {
    handler = (req, res, n) => (n === 1 ? req.socket.destroy() : res.end('{"ok":true}'));
    await expect(client().getJson("/v1/deals")).resolves.toEqual({ ok: true });
    expect(received).toHaveLength(2);
  });

  it("resends a body that is not JSON (a page cut short by a proxy)", async () => {
    handler = (_req, res, n) => res.end(n === 1 ? '{"data": [1, 2' : '{"data":[1,2]}');
    await expect(client().getJson("/v1/deals")).resolves.toEqual({ data: [1, 2] });
    expect(received).toHaveLength(2);
  });

  it("does not resend a call that timed out: it already spent its whole time", async () => {
    const held: ServerResponse[] = [];
    handler = (_req, res) => {
      held.push(res);
    };
    try {
      await expect(client({ timeoutMs: 150 }).getJson("/slow")).rejects.toBeInstanceOf(TransientError);
      expect(received).toHaveLength(1);
    } finally {
      for (const res of held) res.end("{}");
    }
  });

  it("stops at once when the task's signal aborts, without a resend", async () => {
    const stop = new AbortController();
    handler = (_req, res) => {
      stop.abort(new Error("the task is stopping"));
      gatewayError(res);
    };
    await expect(client({ resendBackoffMs: 5_000 }).getJson("/x", {}, "list", stop.signal)).rejects.toThrow();
    expect(received).toHaveLength(1);
  });
});
