import { readFileSync } from "node:fs";
import { startSandbox } from "@drover/crm-sandbox";
import {
  type BudgetPacer,
  nextMidnight,
  type PacedAnswer,
  RateLimitedError,
  SourceClient,
} from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { dailyRefusal, pipedriveAdapter } from "../src/client.js";
import { crmProvider } from "../src/provider.js";

/** Sends at once and keeps every answer the client hands it. */
function recordingPacer(): BudgetPacer & { answers: PacedAnswer[]; costs: number[] } {
  const answers: PacedAnswer[] = [];
  const costs: number[] = [];
  return {
    answers,
    costs,
    graceMs: Number.POSITIVE_INFINITY,
    acquire: async (cost, _signal, count = 1) => {
      costs.push(cost);
      return Array.from({ length: count }, () => Date.now());
    },
    absorb: (answer) => answers.push(answer),
  };
}

/** A second into the next hour, standing still: the sandbox's day resets at no moment of a test. */
const NEXT_HOUR = Math.floor(Date.now() / 3_600_000) * 3_600_000 + 3_601_000;

async function withSandbox<T>(
  options: Parameters<typeof startSandbox>[0],
  fn: (client: SourceClient, pacer: ReturnType<typeof recordingPacer>) => Promise<T>,
  dailyReset?: string,
): Promise<T> {
  const sandbox = await startSandbox(
    { port: 0, tokens: ["pd-token"], ...options },
    { clock: () => NEXT_HOUR },
  );
  const pacer = recordingPacer();
  try {
    return await fn(
      new SourceClient({
        baseUrl: sandbox.url,
        apiToken: "pd-token",
        adapter: pipedriveAdapter(dailyReset),
        pacer,
      }),
      pacer,
    );
  } finally {
    await sandbox.close();
  }
}

describe("the Pipedrive adapter", () => {
  it("presents the token in x-api-token, prices a list at 20, and reads the burst window (its capacity over 2 s) and the daily allowance with its reset", async () => {
    await withSandbox({ organizations: 3, burstLimit: 5, dailyBudget: 100 }, async (client, pacer) => {
      const before = Date.now();
      await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list");
      expect(pacer.costs).toEqual([20]);
      const [answer] = pacer.answers;
      expect(answer).toMatchObject({
        status: 200,
        cost: 20,
        reading: { burstCapacity: 5, burstWindowMs: 2_000, burstRemaining: 4, daily: { remaining: 80 } },
      });
      // No answer said when the allowance returns: the documented rule does, midnight (UTC here).
      expect(answer!.reading.daily!.resetAt).toBe(nextMidnight(before, "UTC"));
      expect(answer!.reading.burstResetAt).toBeGreaterThan(before);
    });
  });

  it("knows a spent day by the 429's body, takes the rule's reset as a hint only, and walls the account until the next half hour where a midnight may fall", async () => {
    await withSandbox(
      { organizations: 3, burstLimit: 20, dailyBudget: 30, dailyResetSeconds: 3_600 },
      async (client, pacer) => {
        await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list");
        const err = await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list").catch((e) => e);
        expect(err).toBeInstanceOf(RateLimitedError);
        const refused = pacer.answers[1]!;
        expect(refused.status).toBe(429);
        expect(refused.reading.burstRemaining).toBeGreaterThan(0);
        expect(refused.reading.dailyLimit).toBe(30);
        const daily = refused.reading.daily!;
        // Nothing in the answer says when: the rule (UTC midnight) is the hint, a day of 86,400 s.
        expect(daily).toMatchObject({ remaining: 0, spent: true, resetBy: "rule", periodMs: 86_400_000 });
        expect(daily.resetAt).toBe(nextMidnight(Date.now(), "UTC"));
        // The wall lasts to the next half hour, not to the rule's midnight: the keeper finds the reset.
        const halfHour = 1_800_000;
        expect(refused.reading.blockedUntil).toBe(Math.floor(Date.now() / halfHour) * halfHour + halfHour);
        expect((err as RateLimitedError).retryAt.getTime()).toBe(refused.reading.blockedUntil);
      },
    );
  });

  it("guesses a reset to probe when the rule is probe", async () => {
    await withSandbox(
      { organizations: 3, burstLimit: 20, dailyBudget: 30 },
      async (client, pacer) => {
        await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list");
        const before = Date.now();
        await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list").catch(() => {});
        const daily = pacer.answers[1]!.reading.daily!;
        expect(daily).toMatchObject({ remaining: 0, spent: true, resetBy: "guess" });
        expect(daily.resetAt - before).toBeGreaterThanOrEqual(59_000);
        expect(daily.resetAt - before).toBeLessThanOrEqual(61_000);
        // No rule: a 200's count goes unreported, for want of a reset to send with it.
        expect(pacer.answers[0]!.reading.daily).toBeUndefined();
      },
      "probe",
    );
  });

  it("recognises the recorded daily 429 (no reset in it) as a spent day, and a burst 429 as not", () => {
    const recorded = readFileSync(
      new URL("./fixtures/pipedrive/v1-429-daily-budget.json", import.meta.url),
      "utf8",
    );
    expect(dailyRefusal(recorded)).toBe(true);
    const reading = pipedriveAdapter("UTC", 30).readBudget(
      {
        status: 429,
        headers: new Headers({ "x-ratelimit-remaining": "7", "x-ratelimit-reset": "1" }),
        body: recorded,
      },
      20,
      1_000_012_345,
    );
    expect(reading.daily).toEqual({
      remaining: 0,
      resetAt: 1_000_020_000,
      resetBy: "rule",
      spent: true,
      periodMs: 30_000,
    });
    // A day of 30 s has its half hours every 625 ms, but none is asked inside the 429's Retry-After.
    expect(reading.blockedUntil).toBe(1_000_013_345);
    const patient = pipedriveAdapter("UTC", 86_400).readBudget(
      { status: 429, headers: new Headers({ "retry-after": "1" }), body: recorded },
      20,
      1_000_012_345,
    );
    expect(patient.blockedUntil).toBe(Math.ceil(1_000_012_345 / 1_800_000) * 1_800_000);
  });

  it("puts a shorter day's reset (a sandbox's) at the next multiple of its length since the epoch", () => {
    const headers = new Headers({
      "x-daily-ratelimit-token-remaining": "500",
      "x-daily-ratelimit-token-limit": "900",
    });
    const reading = pipedriveAdapter("UTC", 30).readBudget({ status: 200, headers }, 20, 1_000_012_345);
    expect(reading.daily).toEqual({
      remaining: 500,
      resetAt: 1_000_020_000,
      resetBy: "rule",
      periodMs: 30_000,
    });
    expect(reading.dailyLimit).toBe(900);
  });

  it("reads a burst 429 as the burst window's, not as a spent day", () => {
    const headers = new Headers({ "x-ratelimit-remaining": "0", "x-ratelimit-reset": "2" });
    const body = JSON.stringify({ success: false, error: "Request over limit", errorCode: 429 });
    const reading = pipedriveAdapter().readBudget({ status: 429, headers, body }, 20, 1_000_000);
    expect(reading.daily).toBeUndefined();
    expect(reading.blockedUntil).toBe(1_002_000);
    expect(dailyRefusal(body)).toBe(false);
    expect(dailyRefusal('{"error":"Daily API token budget reached"}')).toBe(true);
  });

  it("treats Cloudflare's 403 block page as throttling for a minute, not as a refused permission", async () => {
    await withSandbox({ organizations: 3, burstLimit: 1, abuseThreshold: 1 }, async (client) => {
      const errors: unknown[] = [];
      for (let i = 0; i < 6 && !(errors.at(-1) as Error | undefined)?.message.includes("403"); i++) {
        await client.getJson("/v1/organizations", {}, "list").catch((e) => errors.push(e));
      }
      const blocked = errors.at(-1) as RateLimitedError;
      expect(blocked).toBeInstanceOf(RateLimitedError);
      expect(blocked.message).toMatch(/throttled the call \(403\)/);
      expect(blocked.retryAt.getTime()).toBeGreaterThan(Date.now() + 55_000);
    });
  });

  it("finds the next midnight on a time zone's wall clock", () => {
    // 23:30 in New York (UTC-4 in daylight time) and 23:59:59 in Tokyo (UTC+9).
    expect(nextMidnight(Date.parse("2026-03-10T03:30:00Z"), "America/New_York")).toBe(
      Date.parse("2026-03-10T04:00:00Z"),
    );
    expect(nextMidnight(Date.parse("2026-01-01T14:59:59.250Z"), "Asia/Tokyo")).toBe(
      Date.parse("2026-01-01T15:00:00Z"),
    );
    expect(nextMidnight(Date.parse("2026-01-01T00:00:00Z"), "UTC")).toBe(Date.parse("2026-01-02T00:00:00Z"));
  });
});

describe("the account's daily reset setting", () => {
  it("takes a time zone or probe, and a day length up to a day, and says what to fix otherwise", () => {
    const check = (settings: Record<string, string>) =>
      crmProvider.validateConfig({ baseUrl: "https://x.pipedrive.com", apiToken: "t", settings });
    expect(check({ dailyReset: "Europe/Berlin" })).toBeUndefined();
    expect(check({ dailyReset: "probe", daySeconds: "60" })).toBeUndefined();
    expect(check({ dailyReset: "Mars/Olympus" })).toBe(
      'crm setting dailyReset must be an IANA time zone (e.g. Europe/Berlin) or "probe", got "Mars/Olympus"',
    );
    expect(check({ daySeconds: "0" })).toBe(
      'crm setting daySeconds must be an integer from 1 to 86400, got "0"',
    );
  });
});
