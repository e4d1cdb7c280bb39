import { startSandbox } from "@drover/crm-sandbox";
import {
  BudgetExhausted_Scope,
  Code,
  createClient,
  isRpcError,
  timestampDate,
  WorkerService,
} from "@drover/proto";
import { nextMidnight, RateLimitedError, SourceClient } from "@drover/provider-sdk";
import { pipedriveAdapter } from "@drover/source-crm";
import { type BudgetWall, parseBudgetWall, taskQueueNames } from "@drover/task-queue";
import { LeasedBudgetPacer } from "@drover/worker";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, until } from "../support/in-process.js";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster({
    workers: 0,
    sandbox: { organizations: 10, burstLimit: 20, latencyMs: 150 },
  });
  await until(() => cluster.coordinator.isLeader(), 15_000);
});
afterAll(async () => {
  await cluster?.close();
});

describe("source budget leased from the coordinator", () => {
  it("three workers sharing one account stay inside its burst window and use most of it", async () => {
    const rpc = createClient(WorkerService, cluster.coordinator.address, {
      metadata: () => ({ authorization: `Bearer ${cluster.tokens.worker}` }),
    });
    try {
      const account = { source: "crm", sourceAccount: "shared-account" };
      // Three processes' worth of pacers, four tasks each, all on one account.
      const clients = [1, 2, 3].map(
        (i) =>
          new SourceClient({
            baseUrl: cluster.sandbox.url,
            apiToken: "t",
            adapter: pipedriveAdapter(),
            pacer: new LeasedBudgetPacer(rpc, { ...account, workerId: `w${i}` }),
          }),
      );
      cluster.sandbox.resetStats();
      let budget = 100;
      let limited = 0;
      const started = Date.now();
      await Promise.all(
        clients.flatMap((c) =>
          Array.from({ length: 4 }, async () => {
            while (budget-- > 0) {
              try {
                await c.getJson("/v1/organizations", { start: 0, limit: 1 }, "list");
              } catch (err) {
                if (!(err instanceof RateLimitedError)) throw err;
                limited++;
              }
            }
          }),
        ),
      );
      const seconds = (Date.now() - started) / 1000;
      const stats = cluster.sandbox.stats();
      expect(limited).toBe(0);
      expect(stats.rateLimited).toBe(0);
      expect(stats.requests).toBe(100);
      // 20 requests per 2 s allowed: 100 requests need at least ~4.5 s; pacing should stay close.
      const utilization = stats.requests / ((20 * seconds) / 2);
      process.stdout.write(
        `budget utilization with 3 workers: ${utilization.toFixed(3)} over ${seconds.toFixed(1)} s\n`,
      );
      expect(utilization).toBeGreaterThan(0.8);
      expect(utilization).toBeLessThanOrEqual(1.05);
    } finally {
      rpc.close();
    }
  });

  it("a 429 reported by one worker holds every worker off until the reset", async () => {
    const rpc = createClient(WorkerService, cluster.coordinator.address, {
      metadata: () => ({ authorization: `Bearer ${cluster.tokens.worker}` }),
    });
    try {
      const account = { source: "crm", sourceAccount: "walled-account" };
      const blockedUntil = Date.now() + 3_000;
      const first = new LeasedBudgetPacer(rpc, { ...account, workerId: "a" });
      first.absorb({ status: 429, cost: 20, reading: { burstCapacity: 20, blockedUntil } });
      await first.report();
      const other = new LeasedBudgetPacer(rpc, { ...account, workerId: "b" });
      const [slot] = await other.acquire(20);
      expect(slot!).toBeGreaterThanOrEqual(blockedUntil - 50);
    } finally {
      rpc.close();
    }
  });
});

describe("the wall after a 429", () => {
  it("is announced to every worker over NATS, and a worker drops the slots it already held", async () => {
    const nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
    const rpc = createClient(WorkerService, cluster.coordinator.address, {
      metadata: () => ({ authorization: `Bearer ${cluster.tokens.worker}` }),
    });
    try {
      const heard: BudgetWall[] = [];
      const sub = nc.subscribe(taskQueueNames(cluster.prefix).budgetWallSubject, {
        callback: (_err, msg) => {
          const wall = parseBudgetWall(msg.data);
          if (wall) heard.push(wall);
        },
      });
      await nc.flush();
      const account = { source: "crm", sourceAccount: "announced-account" };
      const holder = new LeasedBudgetPacer(rpc, { ...account, workerId: "holder" });
      const [held] = await holder.acquire(2, undefined, 1);
      expect(held).toBeDefined();

      const hitter = new LeasedBudgetPacer(rpc, { ...account, workerId: "hitter" });
      hitter.absorb({
        status: 429,
        cost: 20,
        reading: { burstCapacity: 20, blockedUntil: Date.now() + 2_000 },
      });
      await hitter.report();
      const wall = await until(() => heard.find((w) => w.account === account.sourceAccount), 5_000);
      expect(wall.until).toBeGreaterThan(Date.now());

      holder.wall(wall.until);
      const [next] = await holder.acquire(2, undefined, 1);
      expect(next!).toBeGreaterThanOrEqual(wall.until);
      sub.unsubscribe();
    } finally {
      rpc.close();
      await nc.close();
    }
  });
});

describe("the daily allowance's reset", () => {
  it("travels from a worker's reading to the coordinator, which then refuses leases until it without calling the source", async () => {
    const sandbox = await startSandbox({ port: 0, organizations: 3, dailyBudget: 30 });
    const rpc = createClient(WorkerService, cluster.coordinator.address, {
      metadata: () => ({ authorization: `Bearer ${cluster.tokens.worker}` }),
    });
    try {
      const account = { source: "crm", sourceAccount: "daily-account" };
      const client = new SourceClient({
        baseUrl: sandbox.url,
        apiToken: "t",
        adapter: pipedriveAdapter(),
        pacer: new LeasedBudgetPacer(rpc, { ...account, workerId: "spender" }),
      });
      const before = Date.now();
      // A list costs 20 of the 30: 10 are left, which buys no second list.
      await client.getJson("/v1/organizations", { start: 0, limit: 1 }, "list");
      // Another process of the account asks next: it hears of the reset only through the coordinator.
      const other = new SourceClient({
        baseUrl: sandbox.url,
        apiToken: "t",
        adapter: pipedriveAdapter(),
        pacer: new LeasedBudgetPacer(rpc, { ...account, workerId: "other" }),
      });
      const err = await other.getJson("/v1/organizations", { start: 0, limit: 1 }, "list").catch((e) => e);
      expect(err).toBeInstanceOf(RateLimitedError);
      // Not the rule's midnight (a hint): the coordinator's first probe, at the next half hour,
      // the tasks woken a second (its lease horizon) before it.
      const halfHour = 1_800_000;
      const firstProbe = (err as RateLimitedError).retryAt.getTime() + 1_000;
      expect(firstProbe).toBeGreaterThan(before);
      expect(firstProbe % halfHour).toBe(0);
      expect(firstProbe).toBeLessThanOrEqual(Math.min(nextMidnight(before, "UTC"), Date.now() + halfHour));
      expect((err as Error).message).toMatch(/daily allowance .* is used up/);
      expect(sandbox.stats().requests).toBe(1);
      // On the wire a spent day is the lease's answer, not an error: its fields say until when and whose.
      const lease = await rpc.leaseBudget({ ...account, want: 1, workerId: "raw", tokensPerSlot: 20 });
      expect(lease).toMatchObject({ granted: 0, exhausted: { scope: BudgetExhausted_Scope.ACCOUNT } });
      expect(timestampDate(lease.retryAt!).getTime()).toBe((err as RateLimitedError).retryAt.getTime());
    } finally {
      rpc.close();
      await sandbox.close();
    }
  });

  it("is refused when a report carries the daily count without it", async () => {
    const rpc = createClient(WorkerService, cluster.coordinator.address, {
      metadata: () => ({ authorization: `Bearer ${cluster.tokens.worker}` }),
    });
    try {
      const err = await rpc
        .reportBudget({
          source: "crm",
          sourceAccount: "half-reported",
          workerId: "w",
          spent: 0n,
          dailyRemaining: 0n,
        })
        .catch((e) => e);
      expect(isRpcError(err, Code.INVALID_ARGUMENT)).toBe(true);
      expect((err as Error).message).toMatch(/daily_remaining and daily_reset_at/);
    } finally {
      rpc.close();
    }
  });
});
