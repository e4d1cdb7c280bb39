import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { get, type Json, post, sandbox, TOKEN } from "./helpers.js";

const fixture = (name: string): Json =>
  JSON.parse(readFileSync(new URL(`fixtures/${name}.json`, import.meta.url), "utf8")) as Json;
const HEADERS = fixture("headers") as Record<string, string[]>;
const DOCUMENTED = new Set(Object.values(HEADERS).flat());
const LIMIT_HEADERS = [
  ...(HEADERS.tenSecondWindow ?? []),
  ...(HEADERS.secondlyDeprecated ?? []),
  ...(HEADERS.daily ?? []),
];

const names = (headers: Headers) => [...headers.keys()];

describe("HubSpot's rate limits", () => {
  it("sends the X-HubSpot-RateLimit-* headers on lists, batch reads, properties and associations, and none on search", async () => {
    const s = await sandbox({
      seed: 21,
      contacts: 20,
      companies: 5,
      tenSecondLimit: 100,
      dailyLimit: 250_000,
    });
    const calls = [
      () => get(s, "/crm/v3/objects/contacts?limit=5"),
      () => post(s, "/crm/v3/objects/contacts/batch/read", { inputs: [{ id: "1000000001" }] }),
      () => get(s, "/crm/v3/properties/contacts"),
      () => post(s, "/crm/v4/associations/contacts/companies/batch/read", { inputs: [{ id: "1000000001" }] }),
    ];
    let remaining = 100;
    for (const call of calls) {
      const r = await call();
      expect(r.status).toBe(200);
      expect(names(r.headers).filter((n) => !DOCUMENTED.has(n))).toEqual([]);
      for (const header of LIMIT_HEADERS) expect(names(r.headers), header).toContain(header);
      expect(r.headers.get("x-hubspot-ratelimit-interval-milliseconds")).toBe("10000");
      expect(r.headers.get("x-hubspot-ratelimit-max")).toBe("100");
      expect(Number(r.headers.get("x-hubspot-ratelimit-remaining"))).toBe(--remaining);
      expect(r.headers.get("x-hubspot-ratelimit-daily")).toBe("250000");
      expect(r.headers.has("retry-after")).toBe(false);
    }
    const search = await post(s, "/crm/v3/objects/contacts/search", { limit: 5 });
    expect(search.status).toBe(200);
    expect(names(search.headers).filter((n) => n.startsWith("x-hubspot-ratelimit"))).toEqual([]);
    expect(names(search.headers)).toContain("x-hubspot-correlation-id");
  });

  it("sends no daily headers for an account without a daily limit (an OAuth app's calls)", async () => {
    const s = await sandbox({ seed: 22, contacts: 5, dailyLimit: 0 });
    const r = await get(s, "/crm/v3/objects/contacts");
    expect(r.headers.has("x-hubspot-ratelimit-max")).toBe(true);
    expect(r.headers.has("x-hubspot-ratelimit-daily")).toBe(false);
  });

  it("refuses the request past the 10-second window with a 429 whose body names TEN_SECONDLY_ROLLING", async () => {
    let now = Date.UTC(2026, 11, 7, 12);
    const s = await sandbox({ seed: 23, contacts: 5, tenSecondLimit: 3 }, { clock: () => now });
    const statuses: number[] = [];
    let refusal: { headers: Headers; body: Json } | null = null;
    for (let i = 0; i < 5; i++) {
      const r = await get(s, "/crm/v3/objects/contacts");
      statuses.push(r.status);
      if (r.status === 429) refusal = r;
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    expect(Object.keys(refusal?.body ?? {}).sort()).toEqual(
      Object.keys(fixture("error-429-ten-secondly")).sort(),
    );
    expect(refusal?.body.policyName).toBe("TEN_SECONDLY_ROLLING");
    expect(refusal?.body.message).toBe(fixture("error-429-ten-secondly").message);
    expect(refusal?.headers.get("x-hubspot-ratelimit-remaining")).toBe("0");
    expect(names(refusal?.headers ?? new Headers()).filter((n) => !DOCUMENTED.has(n))).toEqual([]);
    // Ten seconds after the first admitted request the window has room again.
    now += 10_001;
    expect((await get(s, "/crm/v3/objects/contacts")).status).toBe(200);
  });

  it("keeps a 10-second window per app (token) and one daily count for the account", async () => {
    const now = Date.UTC(2026, 11, 7, 12);
    const s = await sandbox(
      { seed: 27, contacts: 5, tenSecondLimit: 2, dailyLimit: 100 },
      { clock: () => now },
    );
    const as = async (token: string) => {
      const r = await fetch(`${s.url}/crm/v3/objects/contacts`, {
        headers: { authorization: `Bearer ${token}` },
      });
      await r.arrayBuffer();
      return [r.status, r.headers.get("x-hubspot-ratelimit-daily-remaining")] as const;
    };
    expect([await as("app-a"), await as("app-a"), await as("app-a")].map(([status]) => status)).toEqual([
      200, 200, 429,
    ]);
    expect(await as("app-b")).toEqual([200, "97"]);
  });

  it("refuses every request once the day's allowance is spent with the documented DAILY body, until the day ends", async () => {
    let now = Date.UTC(2026, 11, 7, 12, 0, 1);
    const s = await sandbox(
      { seed: 24, contacts: 5, dailyLimit: 2, dailyResetSeconds: 60 },
      { clock: () => now },
    );
    expect((await get(s, "/crm/v3/objects/contacts")).status).toBe(200);
    const second = await get(s, "/crm/v3/objects/contacts");
    expect(second.headers.get("x-hubspot-ratelimit-daily-remaining")).toBe("0");
    const refused = await post(s, "/crm/v3/objects/contacts/search", {});
    expect(refused.status).toBe(429);
    const { correlationId: _c, requestId: _r, ...rest } = refused.body;
    const { correlationId: _fc, requestId: _fr, ...documented } = fixture("error-429-daily");
    expect(rest).toEqual(documented);
    now += 60_000;
    expect((await get(s, "/crm/v3/objects/contacts")).status).toBe(200);
  });

  it("refuses searches past the account's per-second search limit with a 429 that carries no limit headers", async () => {
    const now = Date.UTC(2026, 11, 7, 12);
    const s = await sandbox({ seed: 26, contacts: 5, searchPerSecond: 2 }, { clock: () => now });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await post(s, "/crm/v3/objects/contacts/search", { limit: 1 });
      statuses.push(r.status);
      expect(names(r.headers).filter((n) => n.startsWith("x-hubspot-ratelimit"))).toEqual([]);
      if (r.status === 429) expect(r.body.message).toBe("You have reached your secondly limit.");
    }
    expect(statuses).toEqual([200, 200, 429]);
    // Lists are not searches: the search limit leaves them alone.
    expect((await get(s, "/crm/v3/objects/contacts")).status).toBe(200);
  });

  it("answers a request whose URL is longer than the account's limit with a 414, before counting it", async () => {
    const s = await sandbox({
      seed: 25,
      contacts: 5,
      customProperties: 400,
      maxUrlLength: 2048,
      tenSecondLimit: 5,
    });
    const many = Array.from({ length: 400 }, (_, i) => `drover_custom_${String(i + 1).padStart(2, "0")}`);
    const long = await fetch(`${s.url}/crm/v3/objects/contacts?properties=${many.join(",")}`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    await long.arrayBuffer();
    expect(long.status).toBe(414);
    const batches = [many.slice(0, 100), many.slice(100, 200)];
    for (const batch of batches) {
      const r = await get(s, `/crm/v3/objects/contacts?limit=1&properties=${batch.join(",")}`);
      expect(r.status).toBe(200);
      expect(r.headers.get("x-hubspot-ratelimit-remaining")).toBe(String(5 - 1 - batches.indexOf(batch)));
    }
  });

  it("counts the requests the limits admitted and when the first and last came, from zero again after reset-stats", async () => {
    const s = await sandbox({ seed: 24, contacts: 5, tenSecondLimit: 2 });
    for (let i = 0; i < 3; i++) await get(s, "/crm/v3/objects/contacts");
    const stats = (await (await fetch(`${s.url}/__sandbox/stats`)).json()) as Json;
    expect(stats).toMatchObject({ requests: 3, admitted: 2, byStatus: { 200: 2, 429: 1 } });
    expect(stats.lastAdmittedAt as number).toBeGreaterThanOrEqual(stats.firstAdmittedAt as number);
    expect((await fetch(`${s.url}/__sandbox/reset-stats`, { method: "POST" })).status).toBe(200);
    // The window's two admissions are kept: the limits are the account's, not the counters'.
    expect((await get(s, "/crm/v3/objects/contacts")).status).toBe(429);
    const after = (await (await fetch(`${s.url}/__sandbox/stats`)).json()) as Json;
    expect(after).toMatchObject({ requests: 1, admitted: 0, refusals: { TEN_SECONDLY_ROLLING: 1 } });
    expect(after.firstAdmittedAt).toBeUndefined();
  });
});
