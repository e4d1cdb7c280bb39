import type { WorkEstimate } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { estimateEta, formatAbout } from "../src/run-eta.js";

const NOW = new Date("2026-12-01T12:00:00Z");
const work = (requests: number, tokens: number, atLeast = false): WorkEstimate => ({
  kinds: [{ kind: "mail", requests, tokens, atLeast }],
});

describe("a run's ETA against its account's budget", () => {
  it("is the burst window's pace when today's allowance covers what is left", () => {
    // 600 requests at one per 100 ms: a minute, whatever the daily budget left as long as it covers them.
    const eta = estimateEta(
      work(600, 1_200),
      { slotIntervalMs: 100, dailyRemaining: 5_000, dailyResetAt: new Date("2026-12-02T00:00:00Z") },
      NOW,
    );
    expect(eta).toMatchObject({ seconds: 60, requests: 600, tokens: 1_200, dailyResets: 0, atLeast: false });
    expect(eta.text).toBe("about 1 minute");
  });

  it("waits for as many daily resets as the tokens beyond today need, at the day's allowance", () => {
    // 180,000 tokens; 20,000 left today (reset at midnight, in 12 h); 60,000 a day: today, then
    // three resets (60k + 60k + 40k), the last day's 40k paced like the rest.
    const eta = estimateEta(
      work(90_000, 180_000),
      {
        slotIntervalMs: 100,
        dailyRemaining: 20_000,
        dailyResetAt: new Date("2026-12-02T00:00:00Z"),
        dailyTokens: 60_000,
      },
      NOW,
    );
    expect(eta.dailyResets).toBe(3);
    const lastDayRequests = (90_000 * 40_000) / 180_000;
    expect(eta.seconds).toBe(12 * 3_600 + 2 * 86_400 + (lastDayRequests * 100) / 1_000);
    expect(eta.text).toBe("about 2 days 13 hours");
  });

  it("without a stated allowance, counts each later day as giving what is left today", () => {
    const eta = estimateEta(
      work(100, 3_000),
      { slotIntervalMs: 1_000, dailyRemaining: 1_000, dailyResetAt: new Date("2026-12-01T18:00:00Z") },
      NOW,
    );
    // 1,000 today, then two resets of 1,000: the second at 18:00 tomorrow, its third of the requests paced.
    expect(eta.dailyResets).toBe(2);
    expect(eta.seconds).toBe(6 * 3_600 + 86_400 + Math.round((100 / 3) * 1));
  });

  it("starts after a wall in force, and says 'at least' while the work left is not known", () => {
    const eta = estimateEta(
      work(10, 200, true),
      { slotIntervalMs: 100, blockedUntil: new Date(NOW.getTime() + 3 * 3_600_000 + 12 * 60_000) },
      NOW,
    );
    expect(eta.seconds).toBe(3 * 3_600 + 12 * 60 + 1);
    expect(eta.text).toBe("at least about 3 hours 12 minutes");
  });

  it("is worded in at most two units", () => {
    expect(formatAbout(30)).toBe("under a minute");
    expect(formatAbout(4 * 60 + 10)).toBe("about 4 minutes");
    expect(formatAbout(3_600)).toBe("about 1 hour");
    expect(formatAbout(2 * 86_400 + 5 * 3_600 + 59)).toBe("about 2 days 5 hours");
    expect(formatAbout(86_400 + 20 * 60)).toBe("about 1 day");
    expect(formatAbout(23 * 3_600 + 50 * 60)).toBe("about 23 hours 50 minutes");
  });
});
