import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PermanentError, SourceClient } from "../src/index.js";
import { testAdapter } from "./test-adapter.js";

/** Upper case after a Q: no prefix of it occurs in the client's own words or the path. */
const TOKEN = `QZ${randomBytes(12).toString("hex").toUpperCase()}`;
/** Where the client cuts a 4xx body for its error message. */
const EXCERPT = 200;

let server: Server;
let baseUrl: string;

beforeAll(async () => {
  // Echoes the token in its 401 body with `before` characters ahead of it, like a source that
  // quotes the credential it refused.
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const before = Number(url.searchParams.get("before"));
    if (url.pathname === "/rows") {
      res.end(JSON.stringify({ data: [{ id: 1, note: `token ${TOKEN} pasted by the customer` }] }));
      return;
    }
    res.writeHead(401);
    res.end(`${".".repeat(before)}${TOKEN} is not a valid token`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe("the source's token in what the source sends back", () => {
  it("leaves no prefix of itself in the client's error, wherever the excerpt cuts it", async () => {
    const client = new SourceClient({ baseUrl, apiToken: TOKEN, adapter: testAdapter });
    // From the token wholly inside the excerpt to its first character alone at the cut.
    for (let before = EXCERPT - TOKEN.length - 1; before < EXCERPT; before++) {
      const err = await client.getJson("/v1/deals", { before }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PermanentError);
      const message = (err as Error).message;
      expect(message, `token starting at ${before}`).toMatch(/answered 401/);
      expect(message, `token starting at ${before}`).not.toContain(TOKEN.slice(0, 1));
    }
  });

  it("is gone from a row's text before the provider sees the row", async () => {
    const client = new SourceClient({ baseUrl, apiToken: TOKEN, adapter: testAdapter });
    const page = await client.getJson<{ data: { note: string }[] }>("/rows");
    expect(page.data[0]!.note).toBe("token [redacted] pasted by the customer");
  });
});
