import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { Sandbox } from "../src/index.js";
import { get, type Json, sandbox, TOKEN } from "./helpers.js";

/**
 * The sandbox serves exactly what Pipedrive serves. For every endpoint the crm provider calls, the
 * keys of what the sandbox answers equal the keys of the recorded fixture of that endpoint
 * (packages/sources/crm/test/fixtures/pipedrive, each with its public source in the README there):
 * the envelope, every item, and the objects nested in them, a custom field's 40-hex key written
 * `<cf>` (its companions `<cf>_currency`, ...). A key the sandbox sends and the fixtures do not, or
 * one the fixtures have and the sandbox never sends, fails; so does a response header Pipedrive does
 * not send.
 */
const FIXTURES = new URL("../../sources/crm/test/fixtures/pipedrive/", import.meta.url);
const fixture = (name: string): Json => JSON.parse(readFileSync(new URL(`${name}.json`, FIXTURES), "utf8"));

/** Keys the API sends only sometimes, as documented: `path.key`. */
const SOMETIMES = new Set([
  // Only while more items remain.
  "additional_data.next_start",
  "additional_data.pagination.next_start",
  // A body only where asked for and honoured; a message without one may send none.
  "data[].data.body",
  "data.body",
]);

const CUSTOM_FIELD = /^[0-9a-f]{40}(?=_|$)/;
const normal = (key: string) => key.replace(CUSTOM_FIELD, "<cf>");

/** For each path of nested objects: every key seen there, and the distinct sets of standard (non custom-field) keys. */
interface Shape {
  keys: Map<string, Set<string>>;
  signatures: Map<string, Set<string>>;
}

function shapeOf(bodies: readonly unknown[]): Shape {
  const shape: Shape = { keys: new Map(), signatures: new Map() };
  const walk = (value: unknown, path: string) => {
    if (Array.isArray(value)) {
      for (const v of value) walk(v, `${path}[]`);
      return;
    }
    if (typeof value !== "object" || value === null) return;
    const keys = Object.keys(value)
      .map(normal)
      .filter((k) => !SOMETIMES.has(`${path}.${k}`.replace(/^\./, "")));
    const seen = shape.keys.get(path) ?? new Set<string>();
    for (const k of keys) seen.add(k);
    shape.keys.set(path, seen);
    const standard = keys.filter((k) => !k.startsWith("<cf>")).sort();
    const signatures = shape.signatures.get(path) ?? new Set<string>();
    signatures.add(standard.join(","));
    shape.signatures.set(path, signatures);
    for (const [k, v] of Object.entries(value)) walk(v, path === "" ? normal(k) : `${path}.${normal(k)}`);
  };
  for (const body of bodies) walk(body, "");
  return shape;
}

const sorted = (keys: Iterable<string>) => [...keys].sort();

/**
 * Every path the sandbox sends holds the fixtures' keys there, no more and no fewer, and every
 * object the sandbox sends has the standard keys of one the fixtures have. A nested object the
 * fixtures show and the sandbox only ever sends as null is compared at its parent, by its key.
 */
function expectSameShape(endpoint: string, served: readonly unknown[], recorded: readonly unknown[]) {
  const mine = shapeOf(served);
  const theirs = shapeOf(recorded);
  expect(mine.keys.size, `${endpoint}: nothing served`).toBeGreaterThan(0);
  for (const [path, keys] of mine.keys) {
    const where = `${endpoint} ${path || "(envelope)"}`;
    const want = theirs.keys.get(path);
    expect(want, `${where}: the fixtures have no object here`).toBeDefined();
    expect(sorted(keys), where).toEqual(sorted(want!));
    for (const signature of mine.signatures.get(path)!)
      expect(sorted(theirs.signatures.get(path)!), `${where}: an object with keys ${signature}`).toContain(
        signature,
      );
  }
}

async function body(s: Sandbox, path: string): Promise<Json> {
  const r = await get(s, path);
  expect(r.status, `${path}: ${r.text.slice(0, 200)}`).toBe(200);
  return r.body;
}

const DOCUMENTED_HEADERS = new Set(
  Object.entries(fixture("headers"))
    .filter(([group]) => group !== "cloudflareBlock")
    .flatMap(([, names]) => names as string[]),
);

describe("the sandbox against the recorded Pipedrive fixtures", () => {
  it("serves every endpoint the provider calls with exactly the fixture's keys, envelope and items, nested objects and custom-field companions", async () => {
    const s = await sandbox({
      seed: 31,
      organizations: 120,
      persons: 120,
      deals: 150,
      leads: 150,
      activities: 120,
      notes: 120,
      archivedRate: 0.1,
      deletedDealRate: 0.1,
    });
    const truth = s.truth(["leads", "mail"]).kinds;
    const live = truth.leads.ids.filter((id) => !truth.leads.archived.includes(id));
    // A record fetched alone: forty of them, as some keys (a lead's unset custom fields) come only sometimes.
    const each = (path: (n: number) => string) => Array.from({ length: 40 }, (_, i) => path(i + 1));
    const cases: [string, string[], string[]][] = [
      ["v2 organizations", ["/api/v2/organizations?limit=100"], ["v2-organizations"]],
      ["v2 persons", ["/api/v2/persons?limit=100"], ["v2-persons"]],
      [
        "v2 deals",
        ["/api/v2/deals?status=open,won,lost,deleted&limit=100"],
        ["v2-deals-page1", "v2-deals-page2"],
      ],
      // The same DealItem: its custom fields are shown by the first page's deal.
      ["v2 archived deals", ["/api/v2/deals/archived?limit=100"], ["v2-deals-archived", "v2-deals-page1"]],
      ["v2 activities", ["/api/v2/activities?limit=100"], ["v2-activities"]],
      ["v2 organization", each((n) => `/api/v2/organizations/${n}`), ["v2-organization"]],
      ["v2 person", each((n) => `/api/v2/persons/${n}`), ["v2-person"]],
      ["v2 deal", each((n) => `/api/v2/deals/${n}`), ["v2-deal"]],
      ["v2 activity", each((n) => `/api/v2/activities/${n}`), ["v2-activity"]],
      ["v1 leads", ["/v1/leads?limit=100"], ["v1-leads"]],
      // The same Lead: its custom fields are shown by the live list's lead.
      ["v1 archived leads", ["/v1/leads/archived?limit=100"], ["v1-leads-archived", "v1-leads"]],
      ["v1 lead", each((n) => `/v1/leads/${live[n]}`), ["v1-lead"]],
      ["v1 notes", ["/v1/notes?limit=100"], ["v1-notes"]],
      ["v1 note", each((n) => `/v1/notes/${n}`), ["v1-note"]],
    ];
    for (const [endpoint, paths, fixtures] of cases) {
      const served: Json[] = [];
      for (const path of paths) served.push(await body(s, path));
      expectSameShape(endpoint, served, fixtures.map(fixture));
    }
    // Mail: every deal's list, with and without include_body, and every message fetched alone.
    const lists: Json[] = [];
    const bare: Json[] = [];
    for (let deal = 1; deal <= 150; deal++) {
      const list = await body(s, `/v1/deals/${deal}/mailMessages?include_body=1&limit=100`);
      if (list.data !== null) lists.push(list);
      const plain = await body(s, `/v1/deals/${deal}/mailMessages?limit=100`);
      if (plain.data !== null) bare.push(plain);
    }
    expect(lists.length).toBeGreaterThan(50);
    expectSameShape("/v1/deals/:id/mailMessages?include_body=1", lists, [fixture("v1-deal-mail-with-body")]);
    expectSameShape("/v1/deals/:id/mailMessages", bare, [fixture("v1-deal-mail-with-body")]);
    const singles: Json[] = [];
    for (const id of truth.mail.ids.slice(0, 150))
      singles.push(await body(s, `/v1/mailbox/mailMessages/${id}?include_body=1`));
    expectSameShape("/v1/mailbox/mailMessages/:id", singles, [fixture("v1-mail-message")]);
  });

  it("lets no mail message name a deal, and serves a body-less message's body as absent, null or empty", async () => {
    const s = await sandbox({ seed: 32, deals: 200, listIncludeBody: 0 });
    const mail = s.truth(["mail"]).kinds.mail;
    const states = new Set<string>();
    for (const id of mail.bodyless) {
      const data = (await body(s, `/v1/mailbox/mailMessages/${id}?include_body=1`)).data as Json;
      expect(data).not.toHaveProperty("deal_id");
      expect(data.has_body_flag).toBe(0);
      states.add(!("body" in data) ? "absent" : data.body === null ? "null" : JSON.stringify(data.body));
    }
    expect(sorted(states)).toEqual(sorted(['""', "absent", "null"]));
  });

  it("sends no response header Pipedrive does not, and the rate-limit headers the provider paces by", async () => {
    const s = await sandbox({
      seed: 33,
      deals: 20,
      burstLimit: 3,
      burstWindowMs: 60_000,
      dailyBudget: 100_000,
    });
    const paths = [
      "/api/v2/deals?limit=5",
      "/v1/leads?limit=5",
      "/v1/deals/1/mailMessages",
      "/api/v2/deals/999999",
    ];
    const statuses: number[] = [];
    for (const path of [...paths, "/v1/notes?limit=5"]) {
      const res = await fetch(`${s.url}${path}`, { headers: { "x-api-token": TOKEN } });
      await res.arrayBuffer();
      statuses.push(res.status);
      const names = [...res.headers.keys()];
      // Retry-After comes with a 429 and only there (the fixtures' overLimit headers).
      expect(names.includes("retry-after"), `${path} ${res.status}`).toBe(res.status === 429);
      expect(
        names.filter((n) => !DOCUMENTED_HEADERS.has(n)),
        `${path} ${res.status}`,
      ).toEqual([]);
      for (const paced of ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"])
        expect(names, `${path} ${res.status}`).toContain(paced);
    }
    // Three admitted, then over the burst: a 429 carries the same headers.
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
  });

  it("answers a spent daily budget with the recorded daily 429's body and only documented headers", async () => {
    // A second into a day, on a clock that stands still: no reset falls inside the test.
    const dayStart = Math.floor(Date.now() / 60_000) * 60_000 + 61_000;
    const s = await sandbox(
      { seed: 34, deals: 20, burstLimit: 10, dailyBudget: 10, dailyResetSeconds: 60 },
      { clock: () => dayStart },
    );
    const served: Json[] = [];
    for (const path of ["/api/v2/deals?limit=5", "/api/v2/deals?limit=5", "/v1/leads?limit=5"]) {
      const res = await fetch(`${s.url}${path}`, { headers: { "x-api-token": TOKEN } });
      const names = [...res.headers.keys()];
      expect(
        names.filter((n) => !DOCUMENTED_HEADERS.has(n)),
        `${path} ${res.status}`,
      ).toEqual([]);
      if (res.status === 429) served.push((await res.json()) as Json);
      else await res.arrayBuffer();
    }
    expect(served).toHaveLength(2);
    expectSameShape("a daily 429", served, [fixture("v1-429-daily-budget")]);
    // Word for word the recorded refusal: it names no reset, so no client can read one off it.
    for (const body of served) expect(body).toEqual(fixture("v1-429-daily-budget"));
  });
});
