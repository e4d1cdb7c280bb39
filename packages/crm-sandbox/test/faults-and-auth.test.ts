import { describe, expect, it } from "vitest";
import { startSandbox } from "../src/index.js";
import { get, sandbox } from "./helpers.js";

describe("authentication", () => {
  it("rejects a missing or unknown token with 401 and accepts the api_token query parameter", async () => {
    const s = await sandbox({ tokens: ["good"] });
    const missing = await get(s, "/v1/deals", null);
    expect(missing.status).toBe(401);
    expect(missing.body).toEqual({ success: false, error: "unauthorized" });
    expect((await get(s, "/v1/deals", "bad")).status).toBe(401);
    expect((await get(s, "/v1/deals", "good")).status).toBe(200);
    expect((await get(s, "/v1/deals?api_token=good", null)).status).toBe(200);
  });

  it("accepts any non-empty token when no token list is configured", async () => {
    const s = await sandbox();
    expect((await get(s, "/v1/deals", "whatever")).status).toBe(200);
    expect((await get(s, "/v1/deals", "")).status).toBe(401);
  });

  it("serves truth, stats and healthz without a token", async () => {
    const s = await sandbox({ notes: 12 });
    expect((await get(s, "/healthz", null)).status).toBe(200);
    const truth = await get(s, "/__sandbox/truth?kind=notes", null);
    expect(Object.keys(truth.body.kinds as object)).toEqual(["notes"]);
    expect((await get(s, "/__sandbox/truth?kind=bogus", null)).status).toBe(400);
    expect((await get(s, "/__sandbox/stats", null)).status).toBe(200);
  });
});

describe("transient faults", () => {
  it("fails the same requests with 502/503 on every run of a seed", async () => {
    const statuses = async () => {
      const s = await sandbox({ seed: 99, transientErrorRate: 0.3, deals: 10 });
      const out: number[] = [];
      for (let i = 0; i < 40; i++) out.push((await get(s, "/v1/deals")).status);
      return out;
    };
    const first = await statuses();
    expect(await statuses()).toEqual(first);
    expect(first.filter((st) => st >= 500).length).toBeGreaterThan(3);
    expect(first.filter((st) => st === 200).length).toBeGreaterThan(20);
    expect(first.every((st) => st === 200 || st === 502 || st === 503)).toBe(true);
  });

  it("delays answers by latencyMs plus jitter", async () => {
    const s = await sandbox({ latencyMs: 60, latencyJitterMs: 20 });
    const started = performance.now();
    await get(s, "/v1/deals?limit=1");
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(59);
    expect(took).toBeLessThan(1000);
  });

  it("counts requests by status in stats and resets them on request", async () => {
    const s = await sandbox();
    await get(s, "/v1/deals");
    await get(s, "/v1/nowhere");
    await get(s, "/v1/deals", null);
    expect(s.stats()).toMatchObject({ requests: 3, byStatus: { 200: 1, 404: 1, 401: 1 }, tokensSpent: 20 });
    const reset = await fetch(`${s.url}/__sandbox/reset-stats`, { method: "POST" });
    expect(reset.status).toBe(200);
    expect(s.stats()).toMatchObject({ requests: 0, byStatus: {}, tokensSpent: 0 });
  });
});

describe("faults at run time", () => {
  it("an outage can be turned on and off while the server runs", async () => {
    const sandbox = await startSandbox({ organizations: 5 });
    try {
      const get = () => fetch(`${sandbox.url}/v1/organizations`, { headers: { "x-api-token": "t" } });
      expect((await get()).status).toBe(200);
      const on = await fetch(`${sandbox.url}/__sandbox/faults?transientErrorRate=1`, { method: "POST" });
      expect(((await on.json()) as { transientErrorRate: number }).transientErrorRate).toBe(1);
      expect([502, 503]).toContain((await get()).status);
      await fetch(`${sandbox.url}/__sandbox/faults?transientErrorRate=0`, { method: "POST" });
      expect((await get()).status).toBe(200);
      expect(
        (await fetch(`${sandbox.url}/__sandbox/faults?transientErrorRate=7`, { method: "POST" })).status,
      ).toBe(400);
    } finally {
      await sandbox.close();
    }
  });
});
