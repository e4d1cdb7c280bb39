import { startSandbox } from "@drover/crm-sandbox";
import { type BudgetPacer, type PacedAnswer, RateLimitedError, SourceClient } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { nextMidnight, pipedriveAdapter } from "../src/crm/client.js";

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

async function withSandbox<T>(
  options: Parameters<typeof startSandbox>[0],
  fn: (client: SourceClient, pacer: ReturnType<typeof recordingPacer>) => Promise<T>,
): Promise<T> {
  const sandbox = await startSandbox({ port: 0, tokens: ["pd-token"], ...options });
  const pacer = recordingPacer();
  try {
    return await fn(
      new SourceClient({ baseUrl: sandbox.url, apiToken: "pd-token", adapter: pipedriveAdapter(), pacer }),
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

  it("takes the daily reset from the 429 that says the allowance is spent", async () => {
    await withSandbox(
      { organizations: 3, dailyBudget: 30, dailyResetSeconds: 3_600 },
      async (client, pacer) => {
        await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list");
        const before = Date.now();
        const err = await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list").catch((e) => e);
        expect(err).toBeInstanceOf(RateLimitedError);
        const refused = pacer.answers[1]!;
        expect(refused.status).toBe(429);
        expect(refused.reading.daily!.remaining).toBe(10);
        expect(refused.reading.daily!.resetAt).toBe(refused.reading.blockedUntil);
        expect(refused.reading.daily!.resetAt).toBeGreaterThan(before + 3_500_000);
        expect((err as RateLimitedError).retryAt.getTime()).toBe(refused.reading.blockedUntil);
      },
    );
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
