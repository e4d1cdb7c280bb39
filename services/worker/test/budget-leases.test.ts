import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import {
  BudgetExhausted_Scope,
  type Client,
  Code,
  create,
  ReportBudgetRequestSchema,
  RpcError,
  readBudgetReport,
  timestampFromDate,
  type WorkerService,
} from "@drover/proto";
import { RateLimitedError, type SourceAdapter, SourceClient, TransientError } from "@drover/provider-sdk";
import { afterEach, describe, expect, it, vi } from "vitest";
import { BudgetLeases, LeasedBudgetPacer } from "../src/budget-leases.js";

type Leases = Pick<Client<typeof WorkerService>, "leaseBudget" | "reportBudget">;

/** A coordinator that grants `granted` slots from `fromMs` on, `intervalMs` apart, with the grace given. */
function coordinator(graceMs: number, granted = 2, intervalMs = 10, fromMs = 30): Leases {
  return {
    leaseBudget: async () =>
      ({
        granted,
        firstSlotAt: timestampFromDate(new Date(Date.now() + fromMs)),
        intervalMs,
        graceMs,
      }) as never,
    reportBudget: async () => ({}) as never,
  };
}

const account = { source: "crm", sourceAccount: "acct", workerId: "w" };

/** A coordinator that grants four slots 200 ms apart per lease and keeps the reports it receives. */
function reportingCoordinator() {
  const reports: Parameters<Leases["reportBudget"]>[0][] = [];
  const client: Leases = {
    ...coordinator(40, 4, 200, 30),
    reportBudget: async (req) => {
      reports.push(req);
      return {} as never;
    },
  };
  return { client, reports };
}

describe("a lease shared by the calls waiting on it", () => {
  it("is not ended by one waiter's abort: a task whose claim was lost does not fail its siblings' calls", async () => {
    // A coordinator restarting: it answers UNAVAILABLE twice, then grants.
    let calls = 0;
    const base = coordinator(40, 4, 10, 5);
    const pacer = new LeasedBudgetPacer(
      {
        ...base,
        leaseBudget: async (req, options) => {
          if (++calls <= 2) throw new RpcError(Code.UNAVAILABLE, "waiting for the database");
          return base.leaseBudget(req, options);
        },
      },
      account,
    );
    const lost = new AbortController();
    // The first to ask starts the lease; its task's claim is lost while the lease waits out the restart.
    const first = pacer.acquire(20, lost.signal);
    const sibling = pacer.acquire(20, new AbortController().signal);
    setTimeout(() => lost.abort(new Error("claim lost")), 100);
    await expect(first).rejects.toThrow("claim lost");
    expect(await sibling).toHaveLength(1);
    expect(calls).toBe(3);
  });

  it("is stopped once every call waiting on it has gone", async () => {
    let calls = 0;
    const pacer = new LeasedBudgetPacer(
      {
        ...coordinator(40),
        leaseBudget: async () => {
          calls++;
          throw new RpcError(Code.UNAVAILABLE, "waiting for the database");
        },
      },
      account,
    );
    const gone = new AbortController();
    const waiting = pacer.acquire(20, gone.signal);
    setTimeout(() => gone.abort(new Error("stopped")), 100);
    await expect(waiting).rejects.toThrow("stopped");
    const asked = calls;
    await new Promise((r) => setTimeout(r, 1_200));
    // Retries are 500 ms apart: none went out after the last waiter left.
    expect(calls).toBe(asked);
  });
});

describe("a leased budget's grace", () => {
  it("is the one the coordinator's lease carries", async () => {
    const pacer = new LeasedBudgetPacer(coordinator(250), account);
    const slots = await pacer.acquire(20, undefined, 2);
    expect(slots).toHaveLength(2);
    expect(pacer.graceMs).toBe(250);
  });

  it("keeps a slot that is late by less than the lease's grace instead of leasing again", async () => {
    let leases = 0;
    // Slots a second old: late, but well inside a 10 s grace.
    const base = coordinator(10_000, 3, 0, -1_000);
    const pacer = new LeasedBudgetPacer(
      {
        ...base,
        leaseBudget: (...args: Parameters<Leases["leaseBudget"]>) => {
          leases++;
          return base.leaseBudget(...args);
        },
      },
      account,
    );
    await pacer.acquire(20);
    await pacer.acquire(20, undefined, 2);
    expect(leases).toBe(1);
  });

  it("missing from a lease fails the acquire rather than count every slot late for ever", async () => {
    const pacer = new LeasedBudgetPacer(coordinator(0), account);
    await expect(pacer.acquire(20)).rejects.toBeInstanceOf(TransientError);
  });

  it("tells the coordinator the burst window the source's adapter stated, with every lease", async () => {
    const asked: unknown[] = [];
    const base = coordinator(40);
    const pacer = new LeasedBudgetPacer(
      {
        ...base,
        leaseBudget: (...args: Parameters<Leases["leaseBudget"]>) => {
          asked.push(args[0]);
          return base.leaseBudget(...args);
        },
      },
      account,
    );
    await pacer.acquire(20);
    pacer.absorb({ status: 200, cost: 20, reading: { burstCapacity: 100, burstWindowMs: 60_000 } });
    await pacer.acquire(20, undefined, 2);
    expect(asked).toMatchObject([{ burstWindowMs: 0 }, { burstWindowMs: 60_000 }]);
  });
});

describe("a wall announced after slots were leased and handed out", () => {
  it("takes them back: no call reaches the source before the wall's end", async () => {
    const sentAt: number[] = [];
    const server = createServer((_req, res) => {
      sentAt.push(Date.now());
      res.end("{}");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const adapter: SourceAdapter = { authHeaders: () => ({}), cost: () => 1, readBudget: () => ({}) };
      const pacer = new LeasedBudgetPacer(coordinator(10_000, 3, 0, 0), account);
      const client = new SourceClient({
        baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        apiToken: "t",
        adapter,
        pacer,
      });
      const slots = await client.reserve(3, "get");
      // Another worker met a 429: the coordinator announces the wall (BudgetLeases.wall).
      const wallEnd = Date.now() + 500;
      pacer.wall(wallEnd);
      await Promise.all(slots.map((slot, i) => client.getJson(`/held/${i}`, {}, "get", undefined, { slot })));
      expect(sentAt).toHaveLength(3);
      expect(sentAt.filter((t) => t < wallEnd)).toEqual([]);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe("a spent day", () => {
  it("is reported at once with its reset, guessed or not, and walls every run's pacer of the account in this process", async () => {
    const reports: Record<string, unknown>[] = [];
    const leases = new BudgetLeases(
      {
        ...coordinator(40),
        reportBudget: async (req) => {
          reports.push(req as never);
          return {} as never;
        },
      },
      "w",
    );
    const mine = leases.for("crm", "acct", "run-a");
    const theirs = leases.for("crm", "acct", "run-b");
    const elsewhere = leases.for("crm", "other", "run-c");
    const resetAt = Date.now() + 300_000;
    mine.absorb({
      status: 429,
      cost: 20,
      reading: {
        daily: { remaining: 0, resetAt, resetBy: "guess", spent: true },
        dailyLimit: 1_000,
        blockedUntil: resetAt,
      },
    });
    await mine.report();
    expect(reports).toMatchObject([
      { sourceAccount: "acct", dailyRemaining: 0n, dailyResetGuessed: true, dailyLimit: 1_000n },
    ]);
    expect(theirs.wallUntil()).toBe(resetAt);
    expect(elsewhere.wallUntil()).toBe(0);
    // No task of either run asks the coordinator again: each parks until the reset.
    const err = await theirs.acquire(20).catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.getTime()).toBe(resetAt);
  });

  it("is reported with a rule's reset marked as a hint, with the account's day length, so the coordinator probes for the real one", async () => {
    const reports: Record<string, unknown>[] = [];
    const pacer = new LeasedBudgetPacer(
      {
        ...coordinator(40),
        reportBudget: async (req) => {
          reports.push(req as never);
          return {} as never;
        },
      },
      account,
    );
    const resetAt = Date.now() + 300_000;
    pacer.absorb({
      status: 429,
      cost: 20,
      reading: {
        daily: { remaining: 0, resetAt, resetBy: "rule", spent: true, periodMs: 30_000 },
        blockedUntil: Date.now() + 500,
      },
    });
    await pacer.report();
    expect(reports).toMatchObject([{ dailyRemaining: 0n, dailyResetRuled: true, dailyPeriodMs: 30_000n }]);
    expect(reports[0]!.dailyResetGuessed).toBeFalsy();
  });

  it("that the coordinator answers exhausted parks the task until the lease's time, walling the account or only the run as the lease says", async () => {
    const until = new Date(Date.now() + 3 * 3_600_000);
    const exhausted = (scope: BudgetExhausted_Scope): Leases => ({
      ...coordinator(40),
      leaseBudget: async () =>
        ({
          granted: 0,
          retryAt: timestampFromDate(until),
          reportApplied: true,
          exhausted: { scope, reason: "the daily allowance of crm:acct is used up" },
        }) as never,
    });
    const walled: number[] = [];
    const accountWide = new LeasedBudgetPacer(exhausted(BudgetExhausted_Scope.ACCOUNT), account, "r1", (at) =>
      walled.push(at),
    );
    const err = await accountWide.acquire(20).catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect(err).toMatchObject({ message: "the daily allowance of crm:acct is used up", scope: "account" });
    expect((err as RateLimitedError).retryAt.getTime()).toBe(until.getTime());
    expect(walled).toEqual([until.getTime()]);

    const share = new LeasedBudgetPacer(exhausted(BudgetExhausted_Scope.RUN), account, "r2", (at) =>
      walled.push(at),
    );
    expect(await share.acquire(20).catch((e) => e)).toMatchObject({ scope: "run" });
    // A run's spent share is its own wall: the other runs' pacers on the account are not told.
    expect(walled).toHaveLength(1);
  });

  it("that a coordinator older than the exhausted field refuses parks until the reset this process knows, not a flat minute", async () => {
    const pacer = new LeasedBudgetPacer(
      {
        ...coordinator(40),
        leaseBudget: async () => {
          throw new RpcError(Code.RESOURCE_EXHAUSTED, "the daily allowance is used up");
        },
      },
      account,
    );
    const resetAt = Date.now() + 5 * 3_600_000;
    pacer.absorb({ status: 200, cost: 20, reading: { daily: { remaining: 0, resetAt } } });
    const err = await pacer.acquire(20).catch((e) => e);
    expect(err).toBeInstanceOf(RateLimitedError);
    expect((err as RateLimitedError).retryAt.getTime()).toBe(resetAt);
  });

  it("spends a slot only on a call of the cost it was leased for, as the coordinator counted it", async () => {
    const asked: Record<string, unknown>[] = [];
    const base = coordinator(10_000, 4, 0, 0);
    const pacer = new LeasedBudgetPacer(
      {
        ...base,
        leaseBudget: (...args) => {
          asked.push(args[0] as never);
          return base.leaseBudget(...args);
        },
      },
      account,
    );
    await pacer.acquire(2);
    await pacer.acquire(20);
    await pacer.acquire(2, undefined, 3);
    expect(asked).toMatchObject([{ tokensPerSlot: 2 }, { tokensPerSlot: 20 }]);
  });

  it("asks the coordinator with the run the slots are for, whose daily share caps them", async () => {
    const asked: Record<string, unknown>[] = [];
    const base = coordinator(40);
    const pacer = new BudgetLeases(
      {
        ...base,
        leaseBudget: (...args) => {
          asked.push(args[0] as never);
          return base.leaseBudget(...args);
        },
      },
      "w",
    ).for("crm", "acct", "run-a");
    await pacer.acquire(20);
    expect(asked).toMatchObject([{ runId: "run-a", workerId: "w" }]);
  });

  /** A run's pacer leased four slots 200 ms apart, and the reports it sends. */
  function reportingPacer() {
    const { client, reports } = reportingCoordinator();
    return { pacer: new LeasedBudgetPacer(client, account, "run-a"), reports };
  }

  it("gives back the tokens of slots a wall took back or that came too late, with the next report", async () => {
    const { pacer, reports } = reportingPacer();
    await pacer.acquire(20);
    // Three slots are still held: a wall takes them back.
    pacer.wall(Date.now() + 60_000);
    pacer.release(1, 20);
    await pacer.report();
    expect(reports).toMatchObject([{ unused: 80n, runId: "run-a" }]);
  });

  it("says the earliest instant of the unused slots it gives back, so only their own day gets them back", async () => {
    const { pacer, reports } = reportingPacer();
    const before = Date.now();
    const [used] = await pacer.acquire(20);
    // The three held slots, the earliest 200 ms after the one used, are taken back by a wall.
    pacer.wall(Date.now() + 60_000);
    await pacer.report();
    const reported = (i: number) => readBudgetReport(create(ReportBudgetRequestSchema, reports[i]!));
    expect(reported(0)).toMatchObject({ unused: 60, unusedFrom: new Date(used! + 200) });
    expect(used! + 200).toBeGreaterThan(before);
    // A slot the source client found too late says its own, earlier instant.
    pacer.release(1, 20, used!);
    await pacer.report();
    expect(reported(1)).toMatchObject({ unused: 20, unusedFrom: new Date(used!) });
  });
});

describe("readings not reported yet", () => {
  const answer = { status: 200, cost: 20, reading: { burstCapacity: 80 } };
  type LeaseRequest = Parameters<Leases["leaseBudget"]>[0];
  type ReportRequest = Parameters<Leases["reportBudget"]>[0];

  /**
   * A pacer over a coordinator granting a slot at a time: `onLease` sees each lease request (and may
   * throw, as a failing leader does) and says whether the coordinator applied the readings it
   * carried; `onReport` sees each report.
   */
  function pacerOver(onLease: (req: LeaseRequest) => boolean, onReport: (req: ReportRequest) => void) {
    const base = coordinator(40, 1, 10, 0);
    return new LeasedBudgetPacer(
      {
        leaseBudget: async (req, options) => {
          const reportApplied = onLease(req);
          return { ...((await base.leaseBudget(req, options)) as object), reportApplied } as never;
        },
        reportBudget: async (req) => {
          onReport(req);
          return {} as never;
        },
      },
      account,
    );
  }

  it("travel with the next lease, so a page read costs one call to the coordinator, not a report and a lease", async () => {
    const leases: Record<string, unknown>[] = [];
    let reports = 0;
    const pacer = pacerOver(
      (req) => {
        leases.push(req as never);
        return true;
      },
      () => {
        reports++;
      },
    );
    await pacer.acquire(20);
    pacer.absorb(answer);
    pacer.absorb(answer);
    await pacer.acquire(20);
    // The capacity's change is reported at once; the tokens spent after it ride with the next lease.
    expect(reports).toBe(1);
    expect(leases[1]).toMatchObject({ report: { spent: 20n } });
    expect(leases[0]!.report).toBeUndefined();
  });

  it("never carry the tokens of unused slots: those go in a report of their own, before the lease", async () => {
    const calls: string[] = [];
    const pacer = pacerOver(
      (req) => {
        calls.push(`lease${req.report ? ` carrying unused=${req.report.unused ?? 0n}` : ""}`);
        return true;
      },
      (req) => {
        calls.push(`report unused=${req.unused ?? 0n}`);
      },
    );
    pacer.absorb(answer);
    await pacer.report();
    calls.length = 0;
    pacer.absorb(answer);
    pacer.release(1, 20);
    await pacer.acquire(20);
    // A lease cut short after the leader applied it keeps what it carried for the next call: given
    // back twice, those tokens would be slots granted beyond a run's share.
    expect(calls).toEqual(["report unused=20", "lease"]);
  });

  it("go out as a report when the coordinator predates the field, once, and after a failed lease with the next one", async () => {
    const reported: bigint[] = [];
    const carried: bigint[] = [];
    let fail = true;
    let old = true;
    const pacer = pacerOver(
      (req) => {
        if (req.report) carried.push(req.report.spent ?? 0n);
        if (fail) {
          fail = false;
          throw new RpcError(Code.UNAVAILABLE, "the leader is failing over");
        }
        return !old && req.report !== undefined;
      },
      (req) => {
        reported.push(req.spent ?? 0n);
      },
    );
    pacer.absorb(answer);
    await pacer.report();
    reported.length = 0;
    pacer.absorb(answer);
    // The first lease fails: its readings are kept and the retry carries them again.
    await pacer.acquire(20);
    expect(carried).toEqual([20n, 20n]);
    // An old coordinator did not apply them: they were reported on their own, exactly once.
    await pacer.report();
    expect(reported).toEqual([20n]);
    old = false;
    pacer.absorb(answer);
    await pacer.acquire(20);
    await pacer.report();
    expect(carried).toEqual([20n, 20n, 20n]);
    expect(reported).toEqual([20n]);
  });
});

describe("the pacers of a worker", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A worker's pacers, leased four slots 200 ms apart each time, and the reports they send, read. */
  function reportingLeases() {
    const { client, reports } = reportingCoordinator();
    const reported = () => reports.map((r) => readBudgetReport(create(ReportBudgetRequestSchema, r)));
    return { leases: new BudgetLeases(client, "w"), reported };
  }

  it("give back the slots they still hold when the worker stops, so the day and the run's share get them again", async () => {
    const { leases, reported } = reportingLeases();
    const [used] = await leases.for("crm", "acct", "run-a").acquire(20);
    await leases.flush();
    expect(reported()).toMatchObject([{ unused: 60, unusedFrom: new Date(used! + 200) }]);
    // Given back once: a second flush has nothing to say.
    await leases.flush();
    expect(reported()).toHaveLength(1);
  });

  it("give back the slots an idle run's pacer still holds when they let it go", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const { leases, reported } = reportingLeases();
    const [used] = await leases.for("crm", "acct", "run-done").acquire(20);
    vi.setSystemTime(Date.now() + 70 * 60_000);
    leases.for("crm", "acct", "run-other");
    await vi.waitFor(() => expect(reported()).toHaveLength(1));
    expect(reported()[0]).toMatchObject({ unused: 60, unusedFrom: new Date(used! + 200) });
  });

  it("let go of a run's pacer nobody used for an hour, and keep the busy ones", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const leases = new BudgetLeases(coordinator(40), "w");
    const idle = leases.for("crm", "acct", "run-done");
    const busy = leases.for("crm", "acct", "run-going");
    vi.setSystemTime(Date.now() + 50 * 60_000);
    busy.absorb({ status: 200, cost: 20, reading: {} });
    vi.setSystemTime(Date.now() + 20 * 60_000);
    expect(leases.for("crm", "acct", "run-going")).toBe(busy);
    expect(leases.for("crm", "acct", "run-done")).not.toBe(idle);
  });
});
