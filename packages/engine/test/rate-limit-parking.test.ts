import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  HeaderBudgetPacer,
  type Provider,
  RateLimitedError,
  type SourceAdapter,
  SourceClient,
} from "@drover/provider-sdk";
import { DroverError } from "@drover/provider-sdk/engine";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAssignment } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h.close();
});

const resetAt = new Date(Date.now() + 120_000);
const walled: Provider = {
  name: "test",
  phases: [["companies"]],
  validateConfig: () => undefined,
  seedPhase: async () => [],
  runTask: async () => {
    throw new RateLimitedError("rate limited (429)", resetAt);
  },
};

describe("a 429", () => {
  it("parks the task until the reset without spending an attempt, and parks its account's siblings too", async () => {
    const run = await insertRun(h.db, { sourceAccount: "walled", tenantId: "t-a" });
    const otherRunSameAccount = await insertRun(h.db, { sourceAccount: "walled", tenantId: "t-b" });
    const otherAccount = await insertRun(h.db, { sourceAccount: "elsewhere", tenantId: "t-c" });
    const task = await insertTask(h.db, run.id);
    const sibling = await insertTask(h.db, run.id);
    const cousin = await insertTask(h.db, otherRunSameAccount.id);
    const stranger = await insertTask(h.db, otherAccount.id);

    const outcome = await runAssignment(
      { db: h.db, providers: new Map([["test", walled]]), workerId: "w", maxAttempts: 3, notesCap: 10 },
      task.id,
      { shutdown: new AbortController().signal, working: () => {} },
    );
    expect(outcome.status).toBe("parked");
    const rows = await h.db.execute<{ id: string; status: string; attempts: number; parked: boolean }>(sql`
      select id, status, attempts, available_at >= ${resetAt.toISOString()}::timestamptz - interval '1 second' as parked
        from drover.tasks where id in (${task.id}, ${sibling.id}, ${cousin.id}, ${stranger.id}) order by id`);
    expect(rows.map((r) => [Number(r.id), r.status, r.attempts, r.parked])).toEqual([
      [task.id, "pending", 0, true],
      [sibling.id, "pending", 0, true],
      [cousin.id, "pending", 0, true],
      [stranger.id, "pending", 0, false],
    ]);
  });
});

describe("a run's spent daily share", () => {
  it("parks the run's own tasks until the next day, and leaves the other runs on the account going", async () => {
    const shareReturns = new Date(Date.now() + 3_600_000);
    const shareSpent: Provider = {
      ...walled,
      runTask: async () => {
        throw new RateLimitedError("run has spent its daily share", shareReturns, { scope: "run" });
      },
    };
    const run = await insertRun(h.db, { sourceAccount: "shared", tenantId: "t-s1" });
    const other = await insertRun(h.db, { sourceAccount: "shared", tenantId: "t-s2" });
    const task = await insertTask(h.db, run.id);
    const sibling = await insertTask(h.db, run.id);
    const cousin = await insertTask(h.db, other.id);
    const outcome = await runAssignment(
      { db: h.db, providers: new Map([["test", shareSpent]]), workerId: "w", maxAttempts: 3, notesCap: 10 },
      task.id,
      { shutdown: new AbortController().signal, working: () => {} },
    );
    expect(outcome.status).toBe("parked");
    const rows = await h.db.execute<{ id: string; parked: boolean }>(sql`
      select id, available_at >= ${shareReturns.toISOString()}::timestamptz - interval '1 second' as parked
        from drover.tasks where id in (${task.id}, ${sibling.id}, ${cousin.id}) order by id`);
    expect(rows.map((r) => [Number(r.id), r.parked])).toEqual([
      [task.id, true],
      [sibling.id, true],
      [cousin.id, false],
    ]);
  });
});

/** A refusal classified as rate limited that states no time of its own. */
class TimelessRefusal extends DroverError {
  readonly class = "rate_limited" as const;
}

describe("a rate-limited refusal without a time of its own", () => {
  it("parks the task until the wall its account's pacer knows (a spent day's reset), not a flat minute", async () => {
    const dayReturns = Date.now() + 3 * 3_600_000;
    const timeless: Provider = {
      ...walled,
      runTask: async () => {
        throw new TimelessRefusal("the source refused for the rate");
      },
    };
    const pacer = new HeaderBudgetPacer();
    pacer.absorb({ status: 429, cost: 20, reading: { blockedUntil: dayReturns } });
    const run = await insertRun(h.db, { sourceAccount: "spent-day", tenantId: "t-d" });
    const task = await insertTask(h.db, run.id);
    const outcome = await runAssignment(
      {
        db: h.db,
        providers: new Map([["test", timeless]]),
        workerId: "w",
        maxAttempts: 3,
        notesCap: 10,
        pacerFor: () => pacer,
      },
      task.id,
      { shutdown: new AbortController().signal, working: () => {} },
    );
    expect(outcome.status).toBe("parked");
    const [row] = await h.db.execute<{ attempts: number; available_at: Date }>(sql`
      select attempts, available_at from drover.tasks where id = ${task.id}`);
    expect(row!.attempts).toBe(0);
    expect(new Date(row!.available_at).getTime()).toBe(dayReturns);
  });
});

/** A source whose 429 states its reset in `x-ratelimit-reset` and whose edge blocks with a 403 page. */
const edgeAdapter: SourceAdapter = {
  authHeaders: () => ({}),
  cost: () => 1,
  readBudget: ({ status, headers }, _cost, now) =>
    status === 429 ? { blockedUntil: now + Number(headers.get("x-ratelimit-reset")) * 1000 } : {},
  throttledUntil: ({ status, body }, now) =>
    status === 403 && /cloudflare/i.test(body) ? now + 60_000 : undefined,
};

describe("a 403 block after a 429", () => {
  it("parks the task until the wall the 429 stated, not for the flat minute", async () => {
    let held: ServerResponse | undefined;
    const server = createServer((req, res) => {
      if (req.url === "/in-flight") {
        held = res;
        return;
      }
      res.writeHead(429, { "x-ratelimit-reset": "20" });
      res.end("{}");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      // One process, one pacer for the account, as the crm provider keeps it.
      const client = new SourceClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        apiToken: "t",
        adapter: edgeAdapter,
        pacer: new HeaderBudgetPacer(),
      });
      const edged: Provider = {
        ...walled,
        runTask: async (ctx) => {
          await client.getJson((ctx.task.cursor as { path: string }).path);
          return {};
        },
      };
      const run = await insertRun(h.db, { sourceAccount: "edge-walled", tenantId: "t-e" });
      const inFlight = await insertTask(h.db, run.id, { cursor: { path: "/in-flight" } });
      const refused = await insertTask(h.db, run.id, { cursor: { path: "/refused" } });
      const deps = {
        db: h.db,
        providers: new Map([["test", edged]]),
        workerId: "w",
        maxAttempts: 3,
        notesCap: 10,
      };
      const controls = { shutdown: new AbortController().signal, working: () => {} };
      const blocked = runAssignment(deps, inFlight.id, controls);
      await expect.poll(() => held).toBeDefined();
      const before = Date.now();
      expect((await runAssignment(deps, refused.id, controls)).status).toBe("parked");
      const wall = before + 20_000;
      held!.writeHead(403, { "content-type": "text/html" });
      held!.end("<title>Attention Required! | Cloudflare</title>");
      expect((await blocked).status).toBe("parked");
      const [row] = await h.db.execute<{ available_at: string }>(
        sql`select available_at::text from drover.tasks where id = ${inFlight.id}`,
      );
      const parkedUntil = Date.parse(row!.available_at);
      expect(parkedUntil).toBeGreaterThanOrEqual(wall - 1_000);
      expect(parkedUntil).toBeLessThan(Date.now() + 21_000);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
