import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { get, type Json, post, sandbox } from "./helpers.js";

/**
 * The sandbox serves exactly what HubSpot serves. For every endpoint it models, the keys of its
 * answers equal the keys of the recorded fixture of that endpoint (test/fixtures, each with its
 * public source in the README there): the envelope, every item, and the objects nested in them. A
 * key the sandbox sends and the fixture does not, or one the fixture has and the sandbox never
 * sends, fails. A record's `properties` is a map whose keys are the properties asked for (the
 * listing tests pin those): here only its values are held to strings and nulls.
 */
const fixture = (name: string): Json =>
  JSON.parse(readFileSync(new URL(`fixtures/${name}.json`, import.meta.url), "utf8")) as Json;

/** Objects whose keys are data (property names), not the model's fields. */
const MAPS = /(^|\.)properties$/;

/** For each path of nested objects: every key seen there, and the distinct key sets. */
function shapeOf(bodies: readonly unknown[]): {
  keys: Map<string, Set<string>>;
  sets: Map<string, Set<string>>;
} {
  const keys = new Map<string, Set<string>>();
  const sets = new Map<string, Set<string>>();
  const walk = (value: unknown, path: string) => {
    if (Array.isArray(value)) {
      for (const v of value) walk(v, `${path}[]`);
      return;
    }
    if (typeof value !== "object" || value === null) return;
    if (MAPS.test(path)) {
      for (const v of Object.values(value))
        expect(v === null || typeof v === "string", `${path}: ${String(v)}`).toBe(true);
      return;
    }
    const own = Object.keys(value).sort();
    keys.set(path, new Set([...(keys.get(path) ?? []), ...own]));
    sets.set(path, new Set([...(sets.get(path) ?? []), own.join(",")]));
    for (const [k, v] of Object.entries(value)) walk(v, path === "" ? k : `${path}.${k}`);
  };
  for (const body of bodies) walk(body, "");
  return { keys, sets };
}

/** Both ways: every path either side has, the other has with the same keys; every object served has a recorded key set. */
function expectSameShape(endpoint: string, served: readonly unknown[], recorded: readonly unknown[]) {
  const mine = shapeOf(served);
  const theirs = shapeOf(recorded);
  expect([...mine.keys.keys()].sort(), `${endpoint}: paths`).toEqual([...theirs.keys.keys()].sort());
  for (const [path, keys] of mine.keys) {
    expect([...keys].sort(), `${endpoint} ${path || "(envelope)"}`).toEqual(
      [...(theirs.keys.get(path) ?? [])].sort(),
    );
    for (const set of mine.sets.get(path) ?? [])
      expect([...(theirs.sets.get(path) ?? [])], `${endpoint} ${path}: an object with keys ${set}`).toContain(
        set,
      );
  }
}

const ok = async (r: Promise<{ status: number; body: Json; text: string }>): Promise<Json> => {
  const answer = await r;
  expect(answer.status, answer.text.slice(0, 300)).toBe(200);
  return answer.body;
};

describe("the sandbox against the recorded HubSpot fixtures", () => {
  it("serves lists, archived lists, batch reads, searches, properties and associations with exactly the fixtures' keys", async () => {
    const s = await sandbox({
      seed: 31,
      companies: 40,
      contacts: 60,
      deals: 200,
      engagements: 40,
      archivedRate: 0.1,
    });
    const cases: [string, () => Promise<Json>, string[]][] = [
      ["list", () => ok(get(s, "/crm/v3/objects/contacts?limit=10")), ["list-contacts"]],
      // The same model: the archived fixture is a last page, the contacts one shows the paging.
      [
        "archived list",
        () => ok(get(s, "/crm/v3/objects/deals?limit=10&archived=true")),
        ["list-archived-deals", "list-contacts"],
      ],
      [
        "batch read",
        () =>
          ok(
            post(s, "/crm/v3/objects/companies/batch/read", {
              inputs: s
                .ids("companies")
                .live.slice(0, 5)
                .map((id) => ({ id })),
            }),
          ),
        ["batch-read-companies"],
      ],
      [
        "search",
        () => ok(post(s, "/crm/v3/objects/notes/search", { limit: 5, properties: ["hs_note_body"] })),
        ["search-notes"],
      ],
      ["properties", () => ok(get(s, "/crm/v3/properties/contacts")), ["properties-contacts"]],
      [
        "batch read naming a missing id",
        async () => {
          const r = await post(s, "/crm/v3/objects/contacts/batch/read", {
            inputs: [{ id: s.ids("contacts").live[0] }, { id: "999" }],
          });
          expect(r.status).toBe(207);
          return r.body;
        },
        ["batch-read-partial-contacts"],
      ],
      [
        "associations",
        () =>
          ok(
            post(s, "/crm/v4/associations/contacts/companies/batch/read", {
              inputs: s
                .ids("contacts")
                .live.slice(0, 10)
                .map((id) => ({ id })),
            }),
          ),
        ["associations-batch-read"],
      ],
    ];
    for (const [endpoint, call, fixtures] of cases)
      expectSameShape(endpoint, [await call()], fixtures.map(fixture));
  });

  it("answers a bad request with the recorded error body's keys", async () => {
    const s = await sandbox({ seed: 32, contacts: 5 });
    const r = await post(s, "/crm/v3/objects/contacts/search", { limit: 500 });
    expect(r.status).toBe(400);
    expectSameShape("400", [r.body], [fixture("error-400")]);
  });

  it("answers a path naming an object type the account lacks with the recorded 400, which has no category", async () => {
    const s = await sandbox({ seed: 33, contacts: 5 });
    for (const r of [
      await get(s, "/crm/v3/objects/widgets?limit=5"),
      await post(s, "/crm/v3/objects/widgets/search", {}),
      await get(s, "/crm/v3/properties/widgets"),
      await post(s, "/crm/v4/associations/contacts/widgets/batch/read", { inputs: [] }),
    ]) {
      expect(r.status).toBe(400);
      expect(r.body.message).toBe("Unable to infer object type from: widgets");
      expectSameShape("unknown type", [r.body], [fixture("error-unknown-object-type")]);
    }
  });
});
