import { describe, expect, it } from "vitest";
import { StatsRecorder } from "../src/stats.js";
import { get, sandbox } from "./helpers.js";

describe("first and last admitted request times", () => {
  it("are null until a request is admitted, skip 401/403/429, and clear on reset", () => {
    let now = 1_000;
    const stats = new StatsRecorder(() => now);
    expect(stats.snapshot(null)).toMatchObject({ firstRequestAt: null, lastRequestAt: null });
    stats.record(401, null, 0, false);
    stats.record(429, "list", 0, false);
    stats.record(403, "list", 0, false);
    expect(stats.snapshot(null)).toMatchObject({ requests: 3, firstRequestAt: null, lastRequestAt: null });

    now = 2_000;
    stats.record(200, "list", 20, false);
    now = 2_500;
    stats.record(503, "get", 0, true);
    now = 3_000;
    stats.record(404, "get", 2, false);
    now = 3_500;
    stats.record(429, "get", 0, false);
    expect(stats.snapshot(null)).toMatchObject({ firstRequestAt: 2_000, lastRequestAt: 3_000 });

    now = 9_000;
    stats.reset();
    expect(stats.snapshot(null)).toMatchObject({
      requests: 0,
      firstRequestAt: null,
      lastRequestAt: null,
      since: new Date(9_000).toISOString(),
    });
  });

  it("are served by /__sandbox/stats and bracket the requests made", async () => {
    const s = await sandbox({ burstLimit: 2, abuseThreshold: 0 });
    const before = Date.now();
    await get(s, "/v1/deals?limit=1");
    await get(s, "/v1/deals?limit=1");
    expect((await get(s, "/v1/deals?limit=1")).status).toBe(429);
    const after = Date.now();
    const body = (await get(s, "/__sandbox/stats", null)).body as {
      firstRequestAt: number;
      lastRequestAt: number;
      rateLimited: number;
    };
    expect(body.rateLimited).toBe(1);
    expect(body.firstRequestAt).toBeGreaterThanOrEqual(before);
    expect(body.lastRequestAt).toBeGreaterThanOrEqual(body.firstRequestAt);
    expect(body.lastRequestAt).toBeLessThanOrEqual(after);
    await fetch(`${s.url}/__sandbox/reset-stats`, { method: "POST" });
    expect(s.stats()).toMatchObject({ firstRequestAt: null, lastRequestAt: null });
  });
});
