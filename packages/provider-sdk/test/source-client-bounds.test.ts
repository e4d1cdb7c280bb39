import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PermanentError, SourceClient } from "../src/index.js";
import { testAdapter } from "./test-adapter.js";

// A source that streams without end and without a content-length: untrusted, so bounded as it reads.
let server: Server;
let baseUrl: string;
let stopped = false;

beforeAll(async () => {
  server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    const chunk = Buffer.alloc(64 * 1024, "a");
    const pump = () => {
      while (!stopped && !res.destroyed && res.write(chunk)) {
        // until the socket pushes back
      }
      if (!stopped && !res.destroyed) res.once("drain", pump);
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  stopped = true;
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe("source client bounds", () => {
  it("stops reading an endless chunked body at the limit instead of buffering it", async () => {
    const client = new SourceClient({
      baseUrl,
      apiToken: "t",
      adapter: testAdapter,
      maxResponseBytes: 1024 * 1024,
    });
    const err = await client.getJson("/endless").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PermanentError);
    expect((err as Error).message).toMatch(/exceeds the 1048576-byte limit/);
  });
});
