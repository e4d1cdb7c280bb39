import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../src/index.js";
import { type Json, sandbox, TOKEN } from "./helpers.js";

/** Recorded from Pipedrive's public docs; the README beside them names each source. */
const FIXTURES = new URL("../../sources/crm/test/fixtures/pipedrive/", import.meta.url);
const fixture = (name: string): Json => JSON.parse(readFileSync(new URL(`${name}.json`, FIXTURES), "utf8"));

interface Delivery {
  auth: string | undefined;
  body: { meta: Json; data: Json | null; previous: Json | null };
}

/** A subscription URL that answers `status(n)` to its n-th request (0-based) and keeps every body. */
async function receiver(status: (n: number) => number = () => 200) {
  const got: Delivery[] = [];
  let n = 0;
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    let text = "";
    for await (const chunk of req) text += chunk;
    got.push({ auth: req.headers.authorization, body: JSON.parse(text) });
    res.writeHead(status(n++)).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got };
}
const servers: Server[] = [];
afterAll(() => {
  for (const s of servers) s.close();
});

async function call(s: Sandbox, method: string, path: string, body?: unknown) {
  const res = await fetch(`${s.url}${path}`, {
    method,
    headers: { "x-api-token": TOKEN, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

async function until(what: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 10));
  }
}

const small = { organizations: 20, persons: 20, deals: 20, leads: 10, activities: 10, notes: 10 };

describe("the sandbox's webhooks (Pipedrive webhooks v2)", () => {
  it("creates, lists and deletes webhooks with the documented shape", async () => {
    const s = await sandbox(small);
    const made = await call(s, "POST", "/v1/webhooks", {
      subscription_url: "https://example.com/hook",
      event_action: "*",
      event_object: "deal",
      http_auth_user: "u",
      http_auth_password: "p",
      version: "2.0",
    });
    expect(made.status).toBe(201);
    const want = fixture("v1-webhook-added");
    expect(Object.keys(made.body).sort()).toEqual(Object.keys(want).sort());
    expect(Object.keys(made.body.data as Json).sort()).toEqual(Object.keys(want.data as Json).sort());
    const id = (made.body.data as Json).id as number;
    expect((await call(s, "GET", "/v1/webhooks")).body.data).toHaveLength(1);
    expect((await call(s, "DELETE", `/v1/webhooks/${id}`)).status).toBe(200);
    expect((await call(s, "GET", "/v1/webhooks")).body.data).toHaveLength(0);
    expect((await call(s, "DELETE", `/v1/webhooks/${id}`)).status).toBe(404);
  });

  it("refuses a webhook without a valid url, action or object", async () => {
    const s = await sandbox(small);
    const good = { subscription_url: "https://example.com/h", event_action: "*", event_object: "*" };
    for (const bad of [
      { ...good, subscription_url: "not a url" },
      { ...good, event_action: "updated" },
      { ...good, event_object: "mail" },
      { ...good, version: "1.0" },
    ])
      expect((await call(s, "POST", "/v1/webhooks", bad)).status).toBe(400);
  });

  it("refuses every webhook on an account that does not allow them (webhooksRefused)", async () => {
    const s = await sandbox({ ...small, webhooksRefused: 1 });
    const made = await call(s, "POST", "/v1/webhooks", {
      subscription_url: "https://example.com/h",
      event_action: "*",
      event_object: "*",
    });
    expect(made.status).toBe(403);
    expect((await call(s, "GET", "/v1/webhooks")).body.data).toHaveLength(0);
  });

  it("delivers one {meta, data, previous} per change of a round, with basic auth and the fixture's meta keys", async () => {
    const s = await sandbox({ ...small, changeEdits: 2, changeAdds: 1, changeDeletes: 1 });
    const r = await receiver();
    await call(s, "POST", "/v1/webhooks", {
      subscription_url: r.url,
      event_action: "*",
      event_object: "*",
      http_auth_user: "run",
      http_auth_password: "s3cret",
    });
    s.applyChanges();
    // Per kind: 2 edits + 1 add + 1 delete, six kinds.
    await until(() => r.got.length === 24);
    const want = fixture("webhook-v2-deal-change");
    for (const { auth, body } of r.got) {
      expect(auth).toBe(`Basic ${Buffer.from("run:s3cret").toString("base64")}`);
      expect(Object.keys(body).sort()).toEqual(["data", "meta", "previous"]);
      expect(Object.keys(body.meta).sort()).toEqual(Object.keys(want.meta as Json).sort());
      expect(body.meta.version).toBe("2.0");
      expect(body.meta.attempt).toBe(1);
    }
    const deal = (action: string) =>
      r.got.filter((d) => d.body.meta.entity === "deal" && d.body.meta.action === action);
    expect(deal("change")).toHaveLength(2);
    const change = deal("change")[0]!.body;
    expect(String(change.data?.title)).toMatch(/ \(edited\)$/);
    expect(change.previous).toEqual({ title: String(change.data?.title).replace(" (edited)", "") });
    expect(deal("delete")[0]!.body.data).toBeNull();
    expect(deal("create")[0]!.body.previous).toBeNull();
    expect(new Set(r.got.map((d) => d.body.meta.id)).size).toBe(24);
    const lead = r.got.find((d) => d.body.meta.entity === "lead")!;
    expect(lead.body.meta.entity_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("retries a failed delivery 3 more times with the same event id and counts it lost after the last", async () => {
    const s = await sandbox({ ...small, changeEdits: 1, webhookTimeScale: 0.001 });
    const r = await receiver(() => 500);
    await call(s, "POST", "/v1/webhooks", {
      subscription_url: r.url,
      event_action: "change",
      event_object: "deal",
    });
    s.applyChanges();
    await until(() => s.webhookStats().lost === 1);
    expect(r.got.map((d) => d.body.meta.attempt)).toEqual([1, 2, 3, 4]);
    expect(new Set(r.got.map((d) => d.body.meta.id)).size).toBe(1);
  });

  it("bans a webhook after 10 failed first attempts and loses what happens during the ban", async () => {
    // The first round's 10 deal edits all fail; the ban (30 min × 0.002 = 3.6 s) drops their
    // retries and loses the second round's events; the third, after the ban, is attempted again.
    const s = await sandbox({ ...small, changeEdits: 10, webhookTimeScale: 0.002 });
    const failing = await receiver(() => 500);
    await call(s, "POST", "/v1/webhooks", {
      subscription_url: failing.url,
      event_action: "change",
      event_object: "deal",
    });
    s.applyChanges();
    await until(() => s.webhookStats().pending === 0);
    expect(s.webhookStats().lost).toBe(10);
    const first = () => failing.got.filter((d) => d.body.meta.attempt === 1);
    expect(first()).toHaveLength(10);
    // Banned: the next round is lost at once, nothing is sent.
    s.applyChangesAgain();
    expect(s.webhookStats().lost).toBe(20);
    expect(first()).toHaveLength(10);
    // Once the ban is over, deliveries resume.
    await new Promise((done) => setTimeout(done, 3_700));
    s.applyChangesAgain();
    await until(() => first().length === 20);
  });

  it("stops delivering to a webhook once it is deleted", async () => {
    const s = await sandbox({ ...small, changeEdits: 1 });
    const r = await receiver();
    const made = await call(s, "POST", "/v1/webhooks", {
      subscription_url: r.url,
      event_action: "*",
      event_object: "deal",
    });
    await call(s, "DELETE", `/v1/webhooks/${(made.body.data as Json).id}`);
    s.applyChanges();
    await new Promise((done) => setTimeout(done, 100));
    expect(r.got).toHaveLength(0);
  });
});
