import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BudgetKeeper, DEFAULT_BUDGET_OPTIONS } from "../src/budget-keeper.js";

let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
let clock = 1_000_000;
const now = () => clock;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 2 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

/** The source's rule: in any rolling window, at most `capacity` requests. */
/**
 * A running run of `share` of the account's day on `account`, and a day of 1,000 tokens (or
 * `remaining` of them) reported to the keeper, ending at `resetAt`.
 */
async function runWithShareOfDay(
  keeper: BudgetKeeper,
  account: string,
  share: number,
  resetAt: Date,
  remaining = 1_000,
): Promise<string> {
  const [run] = await database.db.execute<{ id: string }>(sql`
    insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, daily_share)
    values (${`t-${account}`}, 'crm', ${account}, '{deals}', '[["deals"]]', 'running', ${share}) returning id`);
  await keeper.report("crm", account, {
    burstCapacity: 1_000,
    daily: { remaining, resetAt },
    dailyLimit: 1_000,
    spent: 0,
  });
  return run!.id;
}

/** The source's first reading of a new day, at `clock`: the whole allowance, until a day later. */
function newDay(keeper: BudgetKeeper, account: string): Promise<void> {
  return keeper.report("crm", account, {
    daily: { remaining: 1_000, resetAt: new Date(clock + 86_400_000) },
    spent: 0,
  });
}

function maxInAnyWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let max = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

describe("budget keeper", () => {
  it("grants schedules that never exceed the burst window, even when every slot is used as late as allowed", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    await keeper.report("crm", "a1", { burstCapacity: 20, spent: 0 });
    const sends: number[] = [];
    // Ten workers asking in turn for a minute of simulated time, each using its slots at the
    // worst moment: the end of each slot's grace.
    for (let step = 0; step < 600; step++) {
      clock += 100;
      const r = await keeper.lease("crm", "a1", 1 + (step % 4), 20);
      if (r.kind !== "granted") continue;
      for (let i = 0; i < r.granted; i++) {
        const at = r.firstSlotAt + i * r.intervalMs;
        sends.push(step % 2 === 0 ? at : at + DEFAULT_BUDGET_OPTIONS.graceMs);
      }
    }
    expect(maxInAnyWindow(sends, 2_000)).toBeLessThanOrEqual(20);
    // ...and uses most of the allowance: 60 s at 20 per 2 s is 600 requests.
    expect(sends.length).toBeGreaterThan((0.9 * 600 * (60_000 - 2_000)) / 60_000);
  });

  it("spaces slots over the burst window a lease states, and keeps it for leases that do not", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    await keeper.report("crm", "a6", { burstCapacity: 20, spent: 0 });
    clock += 5_000;
    const { graceMs } = DEFAULT_BUDGET_OPTIONS;
    // 20 per minute, not per 2 s.
    const first = await keeper.lease("crm", "a6", 1, 2, 60_000);
    expect(first).toMatchObject({ kind: "granted", intervalMs: (60_000 + graceMs) / 19 });
    clock += 60_000;
    const second = await keeper.lease("crm", "a6", 1, 2);
    expect(second).toMatchObject({ kind: "granted", intervalMs: (60_000 + graceMs) / 19 });
  });

  it("answers with a time to come back when the schedule is full a horizon ahead", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    await keeper.report("crm", "a2", { burstCapacity: 20, spent: 0 });
    clock += 5_000;
    const first = await keeper.lease("crm", "a2", 1_000, 2);
    expect(first.kind).toBe("granted");
    const second = await keeper.lease("crm", "a2", 1, 2);
    expect(second.kind).toBe("wait");
  });

  it("refuses with the reset time once the daily allowance is gone", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    const resetAt = new Date(clock + 3_600_000);
    await keeper.report("crm", "a3", {
      burstCapacity: 20,
      daily: { remaining: 50, resetAt },
      spent: 0,
    });
    clock += 5_000;
    const r = await keeper.lease("crm", "a3", 10, 20);
    expect(r).toMatchObject({ kind: "granted", granted: 2 }); // 50 tokens buy two list calls
    expect(await keeper.lease("crm", "a3", 1, 20)).toEqual({ kind: "exhausted", retryAt: resetAt });
  });

  it("schedules nothing before a 429's reset", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    await keeper.report("crm", "a4", { burstCapacity: 20, spent: 0 });
    clock += 5_000;
    const until = new Date(clock + 800);
    await keeper.report("crm", "a4", { blockedUntil: until, spent: 0 });
    const r = await keeper.lease("crm", "a4", 1, 20);
    expect(r.kind === "granted" && r.firstSlotAt).toBeGreaterThanOrEqual(until.getTime());
  });

  it("writes a row at most once per period, with spent as an increment", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    for (let i = 0; i < 50; i++) await keeper.report("crm", "a5", { burstCapacity: 20, spent: 20 });
    expect(await keeper.persist()).toBe(0); // the period has not passed
    clock += DEFAULT_BUDGET_OPTIONS.persistEveryMs + 1;
    expect(await keeper.persist()).toBe(1);
    expect(await keeper.persist()).toBe(0);
    await keeper.report("crm", "a5", {
      daily: { remaining: 1_000, resetAt: new Date(clock + 3_600_000) },
      spent: 2,
    });
    expect(await keeper.persist()).toBe(1); // the daily counter moved: at once
    const [row] = await database.db.execute<{ spent: string; daily_remaining: string }>(
      sql`select spent, daily_remaining from drover.budgets where source_account = 'a5'`,
    );
    expect(row).toEqual({ spent: "1002", daily_remaining: "1000" });
  });

  it("parks every lease on a spent day until the reset a worker reported, whatever later reports of that day say, then grants again", async () => {
    const walls: number[] = [];
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now, (_s, _a, until) =>
      walls.push(until),
    );
    const rule = new Date(clock + 3_600_000);
    await keeper.report("crm", "d1", {
      burstCapacity: 20,
      daily: { remaining: 400, resetAt: rule },
      spent: 0,
    });
    clock += 5_000;
    // The 429's body said the day returns in 40 s: every worker is told, and nothing is granted.
    const stated = new Date(clock + 40_000);
    await keeper.report("crm", "d1", {
      daily: { remaining: 0, resetAt: stated },
      blockedUntil: stated,
      spent: 0,
    });
    expect(walls).toEqual([stated.getTime()]);
    // A worker's answer from before the refusal, reported late, cannot give the day back.
    await keeper.report("crm", "d1", { daily: { remaining: 380, resetAt: rule }, spent: 20 });
    expect(await keeper.lease("crm", "d1", 4, 20)).toEqual({ kind: "exhausted", retryAt: stated });
    expect(await keeper.lease("crm", "d1", 4, 2)).toEqual({ kind: "exhausted", retryAt: stated });
    expect(await keeper.persist()).toBe(1);
    const [row] = await database.db.execute<{ exhausted: boolean }>(
      sql`select exhausted_at is not null as exhausted from drover.budgets where source_account = 'd1'`,
    );
    expect(row!.exhausted).toBe(true);
    clock = stated.getTime() + 1;
    expect(await keeper.lease("crm", "d1", 4, 20)).toMatchObject({ kind: "granted", granted: 4 });
  });

  it("probes a day whose reset nothing stated once per worker, later each time the probe finds it still spent, never more than an hour apart", async () => {
    const options = { ...DEFAULT_BUDGET_OPTIONS, firstProbeMs: 60_000 };
    const keeper = new BudgetKeeper(database.db, options, now);
    await keeper.report("crm", "d2", { burstCapacity: 20, spent: 0 });
    const guess = () => ({ remaining: 0, resetAt: new Date(clock + 1), guessed: true });
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      clock += 1_000;
      const found = clock;
      await keeper.report("crm", "d2", { daily: guess(), spent: 0 });
      // The other worker's probe finds it spent too: the round's next probe is scheduled once.
      clock += 100;
      await keeper.report("crm", "d2", { daily: guess(), spent: 0 });
      const refused = await keeper.lease("crm", "d2", 5, 20, 0, "", "w1");
      expect(refused.kind).toBe("exhausted");
      delays.push((refused as { retryAt: Date }).retryAt.getTime() - found);
      clock = (refused as { retryAt: Date }).retryAt.getTime();
      // The probe: one slot for each worker, and a second ask of the same worker waits for its answer.
      expect(await keeper.lease("crm", "d2", 5, 20, 0, "", "w1")).toMatchObject({
        kind: "granted",
        granted: 1,
      });
      expect(await keeper.lease("crm", "d2", 5, 20, 0, "", "w2")).toMatchObject({
        kind: "granted",
        granted: 1,
      });
      expect((await keeper.lease("crm", "d2", 5, 20, 0, "", "w1")).kind).toBe("wait");
    }
    expect(delays).toEqual([60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000]);
    // A probe answered: the day is back, and leases are whole again.
    await keeper.report("crm", "d2", { spent: 20 });
    expect(await keeper.lease("crm", "d2", 5, 20, 0, "", "w1")).toMatchObject({
      kind: "granted",
      granted: 5,
    });
  });

  it("holds a run with a daily share to its share of the day's allowance, and starts it afresh the next day", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    const reset = new Date(clock + 3_600_000);
    const half = await runWithShareOfDay(keeper, "d3", 0.5, reset);
    let granted = 0;
    for (let i = 0; i < 20; i++) {
      clock += 1_000;
      const r = await keeper.lease("crm", "d3", 10, 20, 0, half, "w1");
      if (r.kind === "granted") granted += r.granted;
      else expect(r).toEqual({ kind: "exhausted", retryAt: reset, share: true });
    }
    expect(granted * 20).toBe(500);
    // A run without a share still has the rest of the day.
    expect(await keeper.lease("crm", "d3", 10, 20, 0, "", "w1")).toMatchObject({
      kind: "granted",
      granted: 10,
    });
    clock = reset.getTime() + 1;
    await keeper.report("crm", "d3", {
      daily: { remaining: 1_000, resetAt: new Date(clock + 3_600_000) },
      spent: 0,
    });
    expect(await keeper.lease("crm", "d3", 10, 20, 0, half, "w1")).toMatchObject({
      kind: "granted",
      granted: 10,
    });
  });

  it("places no slot of a run's share so near the day's end that its call, used within its grace, could arrive the next day", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    // A new leader grants nothing for its first horizon (an old leader's grants run out meanwhile).
    clock += DEFAULT_BUDGET_OPTIONS.horizonMs + 500;
    const reset = new Date(clock + 500);
    const run = await runWithShareOfDay(keeper, "d5", 0.5, reset);
    // Slots ~2 ms apart: the day's end, not the horizon, bounds the grant, and the last slot used at
    // the end of its grace still comes before the reset.
    const r = await keeper.lease("crm", "d5", 1_000, 1, 2_000, run, "w1");
    expect(r).toMatchObject({ kind: "granted" });
    if (r.kind !== "granted") return;
    expect(r.granted).toBeGreaterThan(100);
    expect(r.granted).toBeLessThan(250);
    expect(r.firstSlotAt + (r.granted - 1) * r.intervalMs + r.graceMs).toBeLessThan(reset.getTime());
    // Asked again right before the reset: nothing of today's share; come back at the reset.
    clock = reset.getTime() - 60;
    expect(await keeper.lease("crm", "d5", 10, 1, 2_000, run, "w1")).toEqual({
      kind: "wait",
      retryAt: reset,
    });
  });

  it("gives the day and the run's share back the tokens of granted slots a worker reports unused", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    const run = await runWithShareOfDay(keeper, "d4", 0.1, new Date(clock + 3_600_000), 200);
    clock += 1_000;
    const granted = await keeper.lease("crm", "d4", 10, 20, 0, run, "w1");
    expect(granted).toMatchObject({ kind: "granted", granted: 5 });
    if (granted.kind !== "granted") return;
    expect((await keeper.lease("crm", "d4", 1, 20, 0, run, "w1")).kind).toBe("exhausted");
    // Three of the five came too late to be used.
    const unusedFrom = new Date(granted.firstSlotAt);
    await keeper.report("crm", "d4", { spent: 40, unused: 60, unusedFrom }, run);
    expect(await keeper.lease("crm", "d4", 10, 20, 0, run, "w1")).toMatchObject({ granted: 3 });
  });

  it("hands a run's share of the day on to the next leader: what the last one granted stays spent", async () => {
    const first = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    clock += DEFAULT_BUDGET_OPTIONS.horizonMs + 500;
    const reset = new Date(clock + 3_600_000);
    const run = await runWithShareOfDay(first, "d7", 0.1, reset);
    expect(await first.lease("crm", "d7", 3, 20, 0, run, "w1")).toMatchObject({ granted: 3 });
    // A share that moved is written at the next pass, without waiting for persistEveryMs.
    expect(await first.persist()).toBe(1);
    // The leader is gone; the next one reads the account's row.
    clock += 5_000;
    const next = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    await next.report("crm", "d7", { dailyLimit: 1_000, spent: 0 });
    clock += DEFAULT_BUDGET_OPTIONS.horizonMs + 500;
    expect(await next.lease("crm", "d7", 10, 20, 0, run, "w1")).toMatchObject({ granted: 2 });
    expect(await next.lease("crm", "d7", 1, 20, 0, run, "w1")).toMatchObject({
      kind: "exhausted",
      share: true,
    });
    // The day after, the share is whole again.
    clock = reset.getTime() + 1;
    await newDay(next, "d7");
    expect(await next.lease("crm", "d7", 10, 20, 0, run, "w1")).toMatchObject({ granted: 5 });
  });

  it("gives the new day and the run's share nothing back for slots of the day before that a worker reports unused after the reset", async () => {
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, now);
    clock += DEFAULT_BUDGET_OPTIONS.horizonMs + 500;
    const reset = new Date(clock + 60_000);
    const run = await runWithShareOfDay(keeper, "d6", 0.1, reset);
    // Yesterday: five list calls granted, the run's whole share of it.
    const yesterday = await keeper.lease("crm", "d6", 5, 20, 0, run, "w1");
    expect(yesterday).toMatchObject({ kind: "granted", granted: 5 });
    if (yesterday.kind !== "granted") return;
    // The next day, the run spends its new share whole...
    clock = reset.getTime() + 1;
    await newDay(keeper, "d6");
    expect(await keeper.lease("crm", "d6", 10, 20, 0, run, "w1")).toMatchObject({ granted: 5 });
    // ...then its worker finds three of yesterday's slots late (its task was parked across the
    // reset): their tokens were yesterday's, and give today's share nothing more.
    await keeper.report(
      "crm",
      "d6",
      { spent: 0, unused: 60, unusedFrom: new Date(yesterday.firstSlotAt) },
      run,
    );
    expect(await keeper.lease("crm", "d6", 1, 20, 0, run, "w1")).toMatchObject({
      kind: "exhausted",
      share: true,
    });
    // Today's own slots reported unused still come back to today's share.
    await keeper.report("crm", "d6", { spent: 0, unused: 40, unusedFrom: new Date(clock + 5) }, run);
    expect(await keeper.lease("crm", "d6", 10, 20, 0, run, "w1")).toMatchObject({ granted: 2 });
  });
});

/**
 * A sandbox's 30-second day whose reset falls 7.5 s past its multiples, where the account's rule
 * says at them: the keeper's own clock, so candidates fall on round numbers.
 */
describe("budget keeper, learning the source's day", () => {
  const DAY = 30_000;
  const STEP = DAY / 48;
  const PHASE = 12 * STEP;
  const EARLY = DEFAULT_BUDGET_OPTIONS.horizonMs;
  let t = 0;
  const at = () => t;
  const rule = () => new Date(Math.floor(t / DAY) * DAY + DAY);
  /** A keeper that began granting a while before `start` (a new one places no slot within a horizon of its start), the clock at `start`. */
  const keeperFrom = (start: number) => {
    t = start - 1_500;
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, at);
    t = start;
    return keeper;
  };
  /** A counted answer: `remaining` left, the rule's reset as its hint. */
  const counted = (remaining: number, spent = 20) => ({
    daily: { remaining, resetAt: rule(), ruled: true, periodMs: DAY },
    spent,
  });
  /** A daily 429: the day is spent, and nothing said when it returns; walled until the next candidate or `wallMs`. */
  const refused = (wallMs = 0) => ({
    daily: { remaining: 0, resetAt: rule(), ruled: true, periodMs: DAY },
    blockedUntil: new Date(Math.max(Math.floor(t / STEP) * STEP + STEP, t + wallMs)),
    spent: 0,
  });

  /**
   * The next time the keeper lets the account be asked: a lease is parked until a second before it
   * (tasks wake late), and the next one gets a slot placed on the instant (a probe) or waits in its
   * lane for it (a learned reset). Returns the instant, with the clock there, and the lease of
   * another worker meanwhile.
   */
  async function nextAsk(keeper: BudgetKeeper, account: string, want = 5) {
    for (let i = 0; i < 3; i++) {
      const r = await keeper.lease("crm", account, want, 20, 0, "", "w1");
      if (r.kind !== "granted") {
        t = r.retryAt.getTime();
        continue;
      }
      t = r.firstSlotAt;
      const other = await keeper.lease("crm", account, want, 20, 0, "", "w2");
      return { at: r.firstSlotAt, granted: r.granted, other };
    }
    throw new Error("nothing granted after three asks");
  }

  /**
   * Spends the account's day 2 s past a multiple, then plays the source: every probe refused until
   * the reset at PHASE past that multiple, then admitted. Returns the probes' instants.
   */
  async function probeUntilLearned(keeper: BudgetKeeper, account: string, wallMs = 0): Promise<number[]> {
    const reset = Math.floor(t / DAY) * DAY + PHASE;
    await keeper.report("crm", account, { burstCapacity: 20, ...counted(500, 0) });
    await keeper.report("crm", account, refused(wallMs));
    const probes: number[] = [];
    for (;;) {
      const probe = await nextAsk(keeper, account);
      // One request, and every other worker waits for its answer.
      expect(probe.granted).toBe(1);
      expect(probe.other.kind).toBe("wait");
      probes.push(probe.at);
      t += 20;
      if (t < reset) {
        await keeper.report("crm", account, refused(wallMs));
        continue;
      }
      await keeper.report("crm", account, counted(980));
      return probes;
    }
  }

  it("probes a spent day at each half hour (scaled) from the first after the spend, not at the rule's reset, and resumes at the first probe admitted", async () => {
    const keeper = keeperFrom(1_000 * DAY + 2_000);
    const spentAt = t;
    const probes = await probeUntilLearned(keeper, "p1");
    // One probe per candidate, from the first after the spend up to the reset: 8 refused, then one admitted.
    const first = Math.ceil(spentAt / STEP) * STEP;
    expect(probes.map((p) => (p - first) / STEP)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(probes.at(-1)).toBe(1_000 * DAY + PHASE);
    expect(rule().getTime()).toBe(1_001 * DAY);
    // The day is back at once: leases are whole again, not held until the rule's next midnight.
    expect(await keeper.lease("crm", "p1", 5, 20, 0, "", "w1")).toMatchObject({
      kind: "granted",
      granted: 5,
    });
  });

  it("refuses at most 48 probes in a day: after a day of candidates refused, the next waits a day after the search began", async () => {
    const keeper = keeperFrom(2_000 * DAY + 2_000);
    await keeper.report("crm", "p2", { burstCapacity: 20, ...counted(500, 0) });
    await keeper.report("crm", "p2", refused());
    const began = t;
    const probes: number[] = [];
    for (let i = 0; i < 49; i++) {
      probes.push((await nextAsk(keeper, "p2")).at);
      t += 20;
      await keeper.report("crm", "p2", refused());
    }
    expect(probes.filter((p) => p < began + DAY)).toHaveLength(48);
    expect(probes[48]).toBeGreaterThanOrEqual(began + DAY);
    expect(probes[48]).toBeLessThanOrEqual(began + DAY + STEP);
  });

  it("never probes inside a refusal's Retry-After, which a short day's half hours can be shorter than", async () => {
    const keeper = keeperFrom(6_000 * DAY + 2_000);
    await keeper.report("crm", "p6", { burstCapacity: 20, ...counted(500, 0) });
    await keeper.report("crm", "p6", refused(1_000));
    expect((await nextAsk(keeper, "p6")).at).toBe(6_000 * DAY + 3_125);
    t += 20;
    await keeper.report("crm", "p6", refused(1_000));
    expect((await nextAsk(keeper, "p6")).at).toBe(6_000 * DAY + 4_375);
  });

  it("narrows a learned reset that probes spaced by Retry-After left loose, by one probe a day inside its window, until it is exact", async () => {
    const keeper = keeperFrom(7_000 * DAY + 2_000);
    // Each refusal says Retry-After 2 s: probes land at 4.375, 6.875 (refused), 9.375 s (admitted).
    const probes = await probeUntilLearned(keeper, "p7", 2_000);
    expect(probes.map((p) => p - 7_000 * DAY)).toEqual([4_375, 6_875, 9_375]);
    /** Spends the day by the keeper's count 3 s after `from`; the next ask. */
    const spendAfter = async (from: number) => {
      t = from + 3_000;
      await keeper.report("crm", "p7", counted(40));
      expect(await keeper.lease("crm", "p7", 5, 20, 0, "", "w1")).toMatchObject({ granted: 2 });
      return nextAsk(keeper, "p7");
    };
    // The window is (6.875, 9.375]: the next day one probe at 8.125 s, admitted; then (6.875, 8.125]: 7.5 s.
    const tries: number[] = [];
    let from = t;
    for (let day = 1; day <= 2; day++) {
      const probe = await spendAfter(from);
      expect(probe.granted).toBe(1);
      tries.push(probe.at - (7_000 + day) * DAY);
      t += 20;
      await keeper.report("crm", "p7", counted(980));
      from = t;
    }
    expect(tries).toEqual([8_125, PHASE]);
    // Exact now: the next day's slots start at 7.5 s, with no probe, the whole day's at once.
    const reopened = await spendAfter(from);
    expect(reopened.at).toBe(7_003 * DAY + PHASE + DEFAULT_BUDGET_OPTIONS.leadMs);
    expect(reopened.granted).toBe(5);
  });

  it("takes a refusal reported before the probe's slot for a late call of the spent day, not for the probe's answer", async () => {
    const keeper = keeperFrom(8_000 * DAY + 7_000);
    await keeper.report("crm", "p8", { burstCapacity: 20, ...counted(500, 0) });
    await keeper.report("crm", "p8", refused());
    // Asked 0.4 s early, the probe's slot is on the candidate at 7.5 s (the reset).
    t = 8_000 * DAY + 7_100;
    expect(await keeper.lease("crm", "p8", 5, 20, 0, "", "w1")).toMatchObject({
      granted: 1,
      firstSlotAt: 8_000 * DAY + PHASE,
    });
    // Another worker's refusal of the spent day arrives before it: the probe is still out.
    t += 100;
    await keeper.report("crm", "p8", refused());
    expect((await keeper.lease("crm", "p8", 5, 20, 0, "", "w2")).kind).toBe("wait");
    // The probe is admitted at the reset: that is the reset learned.
    t = 8_000 * DAY + PHASE + 20;
    await keeper.report("crm", "p8", counted(980));
    await keeper.persist(true);
    const [row] = await database.db.execute<{ phase: string }>(
      sql`select daily_reset_phase_ms as phase from drover.budgets where source_account = 'p8'`,
    );
    expect(row!.phase).toBe(String(PHASE));
  });

  it("learns nothing from a probe admitted without a count after refused ones: a cheaper call may get in on the spent day", async () => {
    const keeper = keeperFrom(9_000 * DAY + 2_000);
    await keeper.report("crm", "p9", { burstCapacity: 20, ...counted(500, 0) });
    await keeper.report("crm", "p9", refused());
    await nextAsk(keeper, "p9");
    t += 20;
    await keeper.report("crm", "p9", refused());
    await nextAsk(keeper, "p9");
    t += 20;
    // A 2-token get admitted, its answer without the daily headers.
    await keeper.report("crm", "p9", { spent: 2 });
    await keeper.persist(true);
    const [row] = await database.db.execute<{ phase: string | null }>(
      sql`select daily_reset_phase_ms as phase from drover.budgets where source_account = 'p9'`,
    );
    expect(row!.phase).toBeNull();
  });

  it("starts probing when its own count spends the day, though no refusal came and the rule says later", async () => {
    t = 3_000 * DAY + 500;
    const keeper = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, at);
    t += 1_500;
    await keeper.report("crm", "p3", { burstCapacity: 20, ...counted(40, 0) });
    expect(await keeper.lease("crm", "p3", 5, 20, 0, "", "w1")).toMatchObject({ granted: 2 });
    t += 1_000;
    const probe = await keeper.lease("crm", "p3", 5, 20, 0, "", "w1");
    // The next candidate is within a second: its probe is granted at once, on the candidate.
    expect(probe).toMatchObject({ kind: "granted", granted: 1, firstSlotAt: Math.ceil(t / STEP) * STEP });
    expect(Math.ceil(t / STEP) * STEP).toBeLessThan(rule().getTime());
    // Only one of the two slots was used: the source still had 20, and admits the probe, counting
    // down from its last count. The day had not turned, and no reset is learned from it.
    t = (probe as { firstSlotAt: number }).firstSlotAt + 20;
    await keeper.report("crm", "p3", counted(0));
    // The search goes on: the next ask is a probe again, one slot.
    expect(await keeper.lease("crm", "p3", 5, 20, 0, "", "w1")).toMatchObject({ granted: 1 });
    await keeper.persist(true);
    const [row] = await database.db.execute<{ phase: string | null }>(
      sql`select daily_reset_phase_ms as phase from drover.budgets where source_account = 'p3'`,
    );
    expect(row!.phase).toBeNull();
  });

  it("waits for the learned reset on later days without a probe, and a new leader reads it from the row", async () => {
    const keeper = keeperFrom(4_000 * DAY + 2_000);
    await probeUntilLearned(keeper, "p4");
    const learned = 4_000 * DAY + PHASE;
    // The same day, spent by the keeper's own count: parked until a second before the learned
    // reset a day later, whose slots start on it, the whole day's at once.
    await keeper.report("crm", "p4", counted(40));
    t += 3_000;
    expect(await keeper.lease("crm", "p4", 5, 20, 0, "", "w1")).toMatchObject({ granted: 2 });
    expect(await keeper.lease("crm", "p4", 5, 20, 0, "", "w1")).toEqual({
      kind: "exhausted",
      retryAt: new Date(learned + DAY - EARLY),
    });
    const reopened = await nextAsk(keeper, "p4");
    expect(reopened).toMatchObject({ at: learned + DAY + DEFAULT_BUDGET_OPTIONS.leadMs, granted: 5 });
    await keeper.persist(true);

    // Leadership changes hands: the next leader knows the reset from the row, not from probes.
    const successor = new BudgetKeeper(database.db, DEFAULT_BUDGET_OPTIONS, at);
    t += 4_000;
    await successor.report("crm", "p4", counted(300));
    await successor.report("crm", "p4", refused());
    expect(await successor.lease("crm", "p4", 5, 20, 0, "", "w1")).toEqual({
      kind: "exhausted",
      retryAt: new Date(learned + 2 * DAY - EARLY),
    });
    const [row] = await database.db.execute<{ phase: string; period: string }>(
      sql`select daily_reset_phase_ms as phase, daily_period_ms as period from drover.budgets where source_account = 'p4'`,
    );
    expect(row).toEqual({ phase: String(PHASE), period: String(DAY) });
  });

  it("searches again when the source refuses at the learned reset, and learns the new one", async () => {
    const keeper = keeperFrom(5_000 * DAY + 2_000);
    await probeUntilLearned(keeper, "p5");
    // The day is spent: its count falls, then a refusal.
    await keeper.report("crm", "p5", counted(10));
    await keeper.report("crm", "p5", refused());
    const learned = 5_000 * DAY + PHASE;
    expect(await keeper.lease("crm", "p5", 5, 20, 0, "", "w1")).toEqual({
      kind: "exhausted",
      retryAt: new Date(learned + DAY - EARLY),
    });
    // At the learned reset the source refuses (the company moved its time zone): the next candidate is probed.
    t = learned + DAY + 10;
    await keeper.report("crm", "p5", refused());
    expect((await nextAsk(keeper, "p5")).at).toBe(learned + DAY + STEP);
    t += 20;
    await keeper.report("crm", "p5", counted(980));
    await keeper.persist(true);
    const [row] = await database.db.execute<{ phase: string }>(
      sql`select daily_reset_phase_ms as phase from drover.budgets where source_account = 'p5'`,
    );
    expect(row!.phase).toBe(String(PHASE + STEP));
  });
});
