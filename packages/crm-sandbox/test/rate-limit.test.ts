import { describe, expect, it } from "vitest";
import { UNMETERED_BURST_LIMIT } from "../src/rate-limit.js";
import { get, sandbox } from "./helpers.js";

/**
 * A clock the test moves by hand: a window or a day passes at once, with no sleep. `dayMs` puts it
 * a second into the next day of that length, so that no reset falls inside the test by chance.
 */
function manualClock(dayMs?: number) {
  let t = dayMs ? Math.floor(Date.now() / dayMs) * dayMs + dayMs + 1_000 : Date.now();
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

describe("burst limit", () => {
  it("counts down x-ratelimit-remaining, answers 429 when the window is full, then a Cloudflare 403", async () => {
    const s = await sandbox({ burstLimit: 5, burstWindowMs: 2000, abuseThreshold: 3 });
    for (let i = 0; i < 5; i++) {
      const ok = await get(s, "/v1/deals?limit=1", "burst");
      expect(ok.status).toBe(200);
      expect(ok.headers.get("x-ratelimit-limit")).toBe("5");
      expect(ok.headers.get("x-ratelimit-remaining")).toBe(String(4 - i));
      expect(Number(ok.headers.get("x-ratelimit-reset"))).toBeGreaterThanOrEqual(1);
    }
    const limited = await get(s, "/v1/deals?limit=1", "burst");
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ success: false, error: "Request over limit", errorCode: 429 });
    expect(limited.headers.get("x-ratelimit-limit")).toBe("5");
    expect(limited.headers.get("x-ratelimit-remaining")).toBe("0");
    const reset = Number(limited.headers.get("x-ratelimit-reset"));
    expect(reset).toBeGreaterThanOrEqual(1);
    expect(reset).toBeLessThanOrEqual(2);

    for (let i = 0; i < 3; i++) expect((await get(s, "/v1/deals?limit=1", "burst")).status).toBe(429);
    const blocked = await get(s, "/v1/deals?limit=1", "burst");
    expect(blocked.status).toBe(403);
    expect(blocked.headers.get("content-type")).toMatch(/^text\/html/);
    expect(blocked.text).toContain("Attention Required! | Cloudflare");

    // The window is per token: another token is unaffected.
    expect((await get(s, "/v1/deals?limit=1", "other")).status).toBe(200);
    expect(s.stats()).toMatchObject({ rateLimited: 4, blocked: 1 });
  });

  it("admits requests again once the client waited for x-ratelimit-reset", async () => {
    const clock = manualClock();
    const s = await sandbox({ burstLimit: 2, burstWindowMs: 300 }, { clock: clock.now });
    await get(s, "/v1/deals", "patient");
    await get(s, "/v1/deals", "patient");
    const limited = await get(s, "/v1/deals", "patient");
    expect(limited.status).toBe(429);
    expect(limited.headers.get("x-ratelimit-reset")).toBe("1");
    clock.advance(299);
    expect((await get(s, "/v1/deals", "patient")).status).toBe(429);
    clock.advance(21);
    expect((await get(s, "/v1/deals", "patient")).status).toBe(200);
  });

  it("advertises a burst window too wide to reach when the burst limit is off, as Pipedrive always describes one", async () => {
    const s = await sandbox();
    const r = await get(s, "/v1/deals");
    expect(r.headers.get("x-ratelimit-limit")).toBe(String(UNMETERED_BURST_LIMIT));
    expect(r.headers.get("x-ratelimit-remaining")).toBe(String(UNMETERED_BURST_LIMIT - 1));
    expect(Number(r.headers.get("x-ratelimit-reset"))).toBeLessThanOrEqual(2);
    expect(r.headers.get("x-daily-ratelimit-token-limit")).toBeNull();
  });
});

describe("daily token budget", () => {
  it("charges list 20 and get 2, shares the budget across tokens and 429s when exhausted", async () => {
    const clock = manualClock(3_600_000);
    const s = await sandbox({ dailyBudget: 100, dailyResetSeconds: 3600 }, { clock: clock.now });
    const first = await get(s, "/v1/deals/1", "a");
    expect(first.headers.get("x-daily-ratelimit-token-limit")).toBe("100");
    expect(first.headers.get("x-daily-ratelimit-token-remaining")).toBe("98");
    for (let i = 0; i < 4; i++) expect((await get(s, "/v1/deals", i % 2 ? "a" : "b")).status).toBe(200);
    const low = await get(s, "/v1/persons/1", "b");
    expect(low.headers.get("x-daily-ratelimit-token-remaining")).toBe("16");
    const exhausted = await get(s, "/v1/deals", "c");
    expect(exhausted.status).toBe(429);
    expect(exhausted.headers.get("x-daily-ratelimit-token-remaining")).toBe("16");
    // Nothing states the day's reset: x-ratelimit-reset and Retry-After describe the burst window.
    expect(Number(exhausted.headers.get("x-ratelimit-reset"))).toBeLessThanOrEqual(2);
    expect(Number(exhausted.headers.get("retry-after"))).toBe(1);
    // A cheaper call still fits in what is left.
    expect((await get(s, "/v1/deals/2", "c")).status).toBe(200);
    expect(s.stats().tokensSpent).toBe(86);
    expect(s.stats().dailyBudgetRemaining).toBe(14);
  });

  it("answers a spent day like Pipedrive: a 429 whose headers describe the burst window, with remaining above 0", async () => {
    const clock = manualClock(60_000);
    const s = await sandbox(
      { dailyBudget: 40, dailyResetSeconds: 60, burstLimit: 10, burstWindowMs: 2000 },
      { clock: clock.now },
    );
    for (let i = 0; i < 2; i++) expect((await get(s, "/v1/deals", "a")).status).toBe(200);
    const spent = await get(s, "/v1/deals", "a");
    expect(spent.status).toBe(429);
    expect(Number(spent.headers.get("x-ratelimit-remaining"))).toBe(8);
    expect(Number(spent.headers.get("x-ratelimit-reset"))).toBeLessThanOrEqual(2);
    expect(Number(spent.headers.get("retry-after"))).toBeLessThanOrEqual(2);
    expect(spent.body).toMatchObject({ success: false, data: null, code: "daily_api_token_budget_reached" });
    // Like Pipedrive's: no reset time anywhere in the body, so no client can read it off the answer.
    expect(spent.body).toEqual({
      success: false,
      error: "Daily API token budget reached",
      error_info: "Please check developers.pipedrive.com for more information about Pipedrive API.",
      data: null,
      additional_data: null,
      code: "daily_api_token_budget_reached",
    });
    expect(JSON.stringify(spent.body)).not.toMatch(/\d{4}-\d{2}-\d{2}|\d{2}:\d{2}/);
  });

  it("starts its day at the offset past each multiple of the day's length, not at the multiples", async () => {
    const clock = manualClock(60_000);
    // A second into a minute: the day of 60 s offset by 25 s began 36 s ago and ends in 24 s.
    const s = await sandbox(
      { dailyBudget: 20, dailyResetSeconds: 60, dailyResetOffsetSeconds: 25 },
      { clock: clock.now },
    );
    const minute = clock.now() - 1_000;
    expect((await get(s, "/v1/deals")).status).toBe(200);
    expect((await get(s, "/v1/deals")).status).toBe(429);
    // The minute's multiple passes: the day does not return there...
    clock.advance(23_000);
    expect((await get(s, "/v1/deals")).status).toBe(429);
    // ...but at the offset past it.
    clock.advance(1_000);
    expect((await get(s, "/v1/deals")).status).toBe(200);
    const days = s.stats().days;
    expect(days.map((d) => [d.startedAt - minute, d.endsAt - minute])).toEqual([
      [-35_000, 25_000],
      [25_000, 85_000],
    ]);
  });

  it("blocks a token that keeps asking inside a daily 429's Retry-After, and not one that waits it out", async () => {
    const clock = manualClock(60_000);
    const s = await sandbox(
      { dailyBudget: 20, dailyResetSeconds: 60, abuseThreshold: 3 },
      { clock: clock.now },
    );
    expect((await get(s, "/v1/deals", "patient")).status).toBe(200);
    // One request per Retry-After, all day: refused, never blocked (a probe of the day's reset).
    for (let i = 0; i < 10; i++) {
      const refused = await get(s, "/v1/deals", "patient");
      expect(refused.status).toBe(429);
      clock.advance(Number(refused.headers.get("retry-after")) * 1000);
    }
    // Four more inside one Retry-After: Cloudflare steps in.
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await get(s, "/v1/deals", "eager")).status);
    expect(statuses).toEqual([429, 429, 429, 429, 403]);
  });

  it("refills the budget when the daily period rolls over, and logs each day: when it began, what it admitted and refused, and who spent it", async () => {
    const clock = manualClock();
    // Days begin at whole seconds (multiples of their length since the epoch).
    clock.advance(1_000 - (clock.now() % 1_000));
    const start = clock.now();
    const s = await sandbox({ dailyBudget: 20, dailyResetSeconds: 1 }, { clock: clock.now });
    expect((await get(s, "/v1/deals", "a")).status).toBe(200);
    expect((await get(s, "/v1/deals", "b")).status).toBe(429);
    clock.advance(1_050);
    expect((await get(s, "/v1/deals", "b")).status).toBe(200);
    expect(s.stats().days).toEqual([
      {
        startedAt: start,
        endsAt: start + 1_000,
        firstAdmittedAt: start,
        firstAdmittedByToken: { a: start },
        admitted: 1,
        spent: 20,
        spentByToken: { a: 20 },
        dailyRefusals: 1,
        burstRefusals: 0,
        blocked: 0,
      },
      {
        startedAt: start + 1_000,
        endsAt: start + 2_000,
        firstAdmittedAt: start + 1_050,
        firstAdmittedByToken: { b: start + 1_050 },
        admitted: 1,
        spent: 20,
        spentByToken: { b: 20 },
        dailyRefusals: 0,
        burstRefusals: 0,
        blocked: 0,
      },
    ]);
  });

  it("charges nothing for requests that fail with 5xx", async () => {
    const s = await sandbox({ dailyBudget: 100, transientErrorRate: 1 });
    for (let i = 0; i < 8; i++) {
      const r = await get(s, "/v1/deals");
      expect([502, 503]).toContain(r.status);
      expect(r.headers.get("x-daily-ratelimit-token-remaining")).toBe("100");
    }
    expect(s.stats()).toMatchObject({ tokensSpent: 0, transientErrors: 8, requests: 8 });
  });
});
