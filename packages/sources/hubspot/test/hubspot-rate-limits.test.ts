import { PermanentError, RateLimitedError } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { hubspotAdapter } from "../src/index.js";
import { clientOf, RecordingPacer, sandbox } from "./helpers.js";

/** The error `call` fails with (the test fails if it succeeds). */
async function failure(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (err) {
    return err;
  }
  throw new Error("the call should have failed");
}

const list = "/crm/v3/objects/contacts";

describe("HubSpot's limits", () => {
  it("reads the 10-second window's size, what is left of it and the day's allowance from the X-HubSpot-RateLimit-* headers", async () => {
    const s = await sandbox({ seed: 11, contacts: 5, tenSecondLimit: 190, dailyLimit: 500_000 });
    const pacer = new RecordingPacer();
    const client = clientOf(s, { pacer, limits: { dailyResetTimeZone: "Europe/Berlin" } });
    await client.get(list, { limit: 1 }, "list");
    await client.get(list, { limit: 1 }, "list");
    const reading = pacer.answers.at(-1)?.reading;
    expect(reading).toMatchObject({ burstCapacity: 190, burstWindowMs: 10_000, burstRemaining: 188 });
    expect(reading?.dailyLimit).toBe(500_000);
    expect(reading?.daily).toMatchObject({ remaining: 499_998, resetBy: "rule" });
    // Berlin's next midnight, an hour or two before UTC's.
    const offsetH = (Date.UTC(2030, 0, 1) - (reading?.daily?.resetAt ?? 0)) / 3_600_000;
    expect((reading?.daily?.resetAt ?? 0) % 3_600_000).toBe(0);
    expect(offsetH % 24 === 1 || offsetH % 24 === 2).toBe(true);
    expect(pacer.answers.every((a) => a.cost === 1)).toBe(true);
  });

  it("takes a TEN_SECONDLY_ROLLING 429 as a rate limit on the account that waits out the 10-second window", async () => {
    const s = await sandbox({ seed: 12, contacts: 5, tenSecondLimit: 2 });
    const client = clientOf(s, { pacer: new RecordingPacer() });
    await client.get(list, {}, "list");
    await client.get(list, {}, "list");
    const before = Date.now();
    const err = await failure(() => client.get(list, {}, "list"));
    expect(err).toBeInstanceOf(RateLimitedError);
    const { retryAt, scope } = err as RateLimitedError;
    expect(scope).toBe("account");
    expect(retryAt.getTime()).toBeGreaterThanOrEqual(before + 10_000);
    expect(retryAt.getTime()).toBeLessThanOrEqual(Date.now() + 10_000);
  });

  it("takes a DAILY 429 as the day spent: the account waits for its midnight, not for the window", async () => {
    const s = await sandbox({ seed: 13, contacts: 5, dailyLimit: 2 });
    const pacer = new RecordingPacer();
    const client = clientOf(s, { pacer, limits: { dailyResetTimeZone: "UTC" } });
    await client.get(list, {}, "list");
    await client.get(list, {}, "list");
    const err = await failure(() => client.get(list, {}, "list"));
    expect(err).toBeInstanceOf(RateLimitedError);
    const midnight = Math.floor(Date.now() / 86_400_000) * 86_400_000 + 86_400_000;
    expect((err as RateLimitedError).retryAt.getTime()).toBe(midnight);
    expect(pacer.answers.at(-1)?.reading.daily).toMatchObject({
      remaining: 0,
      spent: true,
      resetAt: midnight,
    });
  });

  it("takes a DAILY 429 of an account whose time zone is unknown as the day spent until the next half hour a midnight may fall on", async () => {
    const s = await sandbox({ seed: 14, contacts: 5, dailyLimit: 1 });
    const client = clientOf(s, { pacer: new RecordingPacer() });
    await client.get(list, {}, "list");
    const before = Date.now();
    const err = (await failure(() => client.get(list, {}, "list"))) as RateLimitedError;
    expect(err).toBeInstanceOf(RateLimitedError);
    expect(err.retryAt.getTime() % 1_800_000).toBe(0);
    expect(err.retryAt.getTime()).toBeGreaterThan(before);
    expect(err.retryAt.getTime()).toBeLessThanOrEqual(before + 1_800_000);
  });

  it("takes the search limit's 429 (SECONDLY, no headers) as a one-second wait", async () => {
    const s = await sandbox({ seed: 15, contacts: 5, searchPerSecond: 1 });
    // Unpaced on purpose (0): the client would otherwise wait instead of meeting the refusal.
    const client = clientOf(s, { pacer: new RecordingPacer(), searchesPerSecond: 0 });
    await client.search("/crm/v3/objects/contacts/search", { limit: 1 });
    const before = Date.now();
    const err = await failure(() => client.search("/crm/v3/objects/contacts/search", { limit: 1 }));
    expect(err).toBeInstanceOf(RateLimitedError);
    const at = (err as RateLimitedError).retryAt.getTime();
    expect(at).toBeGreaterThanOrEqual(before + 1_000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1_000);
  });

  it("paces searches on HubSpot's five a second, which their answers do not state, and meets no refusal", async () => {
    const s = await sandbox({ seed: 16, contacts: 5, searchPerSecond: 5 });
    const client = clientOf(s);
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 12 }, () => client.search("/crm/v3/objects/contacts/search", { limit: 1 })),
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    expect(s.stats().byStatus["429"] ?? 0).toBe(0);
  });

  it("stays under a small 10-second window by its headers, without a 429", async () => {
    const s = await sandbox({ seed: 17, contacts: 5, tenSecondLimit: 4 });
    const client = clientOf(s);
    const started = Date.now();
    for (let i = 0; i < 5; i++) await client.get(list, {}, "list");
    expect(Date.now() - started).toBeGreaterThanOrEqual(9_000);
    expect(s.stats().byStatus["429"] ?? 0).toBe(0);
  });

  it("fails a request the account refuses (401) as permanent, and sends the token only in the Authorization header", async () => {
    const s = await sandbox({ seed: 18, contacts: 5, tokens: ["pat-right"] });
    const err = await failure(() => clientOf(s, { token: "pat-wrong" }).get(list, {}, "list"));
    expect(err).toBeInstanceOf(PermanentError);
    expect(String((err as Error).message)).toContain("401");
    expect(hubspotAdapter().authHeaders("pat-x")).toEqual({ authorization: "Bearer pat-x" });
    await expect(clientOf(s, { token: "pat-right" }).get(list, {}, "list")).resolves.toBeTruthy();
  });
});
