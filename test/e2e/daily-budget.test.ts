import type { DayLog } from "@drover/crm-sandbox";
import { accountFor, accountingProblems } from "@drover/local-cluster";
import { RunStatus, timestampDate } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness, until, watchToEnd } from "../support/cluster-harness.js";

/**
 * Runs that span days: a sandbox whose "day" lasts DAY_S seconds, starts OFFSET_S seconds past the
 * multiples of that length the account's rule names (dailyReset UTC), and whose daily budget covers
 * about a quarter of the account. Nothing in a refusal says when the day returns. The import must
 * finish over several resets with every row accounted for, without a 403, without a failed task or
 * a spent attempt, learning the day's real start by at most 48 refused probes on the first day it
 * spends whole, then wasting at most one request per worker per reset and resuming within a few
 * seconds of each reset. Then two tenants' runs on one account, with daily shares of 0.5 and 0.25, each stay
 * within its share of every day; and two runs without shares, parked on the same spent day, both
 * resume within 10 s of each reset.
 */
const DAY_S = 30;
/** Where the sandbox's day starts past the rule's: a third of a day, midnight in Los Angeles (UTC-8) scaled. */
const OFFSET_S = 10;
const WORKERS = 2;
/**
 * About a quarter of what the account below costs to import at Pipedrive's published prices (a v2
 * list page 10 tokens, a v1 list page or a deal's mail list 20, one mail body 2; mail listed only
 * for the deals that have some): ~1,900 tokens, so the run spans four or five days.
 */
const DAILY_BUDGET = 450;
const ACCOUNT = "daily-co";

let h: Harness;

beforeAll(async () => {
  h = await openClusterHarness({
    workers: WORKERS,
    laneWidth: 3,
    sandbox: {
      organizations: 60,
      persons: 120,
      deals: 100,
      leads: 40,
      activities: 100,
      notes: 100,
      "mail-per-deal-max": 2,
      "list-include-body": 0,
      "burst-limit": 40,
      "daily-budget": DAILY_BUDGET,
      "daily-reset-seconds": DAY_S,
      "daily-reset-offset-seconds": OFFSET_S,
      "latency-ms": 5,
    },
    env: { DROVER_REAPER_INTERVAL_MS: "500" },
  });
}, 180_000);

afterAll(async () => {
  await h?.close();
}, 120_000);

/** The sandbox's next reset after `at`: OFFSET_S past a multiple of DAY_S. */
function nextReset(at: number): number {
  const day = DAY_S * 1000;
  const offset = OFFSET_S * 1000;
  return Math.floor((at - offset) / day) * day + offset + day;
}

async function days(): Promise<DayLog[]> {
  return ((await (await fetch(`${h.cluster.sandboxUrl}/__sandbox/stats`)).json()) as { days: DayLog[] }).days;
}

/**
 * The account's settings as its operator gives them: the sandbox's short day, reset by the rule.
 * Two deals per mail task: a task parked by the day's end starts its deals again the next day, so
 * small tasks keep what a reset costs small.
 */
const settings = { pageSize: "25", dealsPerMailTask: "2", dailyReset: "UTC", daySeconds: String(DAY_S) };

describe("a run that spans days", () => {
  it("finishes over several resets of a day shifted from the rule, with every row, no 403, no spent attempt, at most 48 refused probes on the first day it spends whole and one wasted request per worker per reset after it, resuming within a few seconds of each real reset", async () => {
    const tenantId = "daily-e2e";
    const since = new Date();
    const { run } = await h.client.startRun({
      tenantId,
      source: "crm",
      sourceAccount: ACCOUNT,
      sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: "daily-token", settings },
    });
    // While the day is spent, GetRun says what the run waits for and until when.
    const parked = await until(
      "the run to wait for the daily budget",
      async () => {
        const r = (await h.client.getRun({ runId: run!.id })).run!;
        return r.budget?.dailySpent ? r : r.status === RunStatus.RUNNING ? undefined : r;
      },
      3 * DAY_S * 1000,
    );
    expect(parked.budget?.dailySpent).toBe(true);
    // Parked until the keeper's next probe (or the reset it learned), not the rule's midnight: no
    // time zone names it, and it is less than a day away.
    expect(parked.budget?.dailyResetTimeZone).toBe("");
    expect(timestampDate(parked.budget!.dailyResetAt!).getTime() - Date.now()).toBeLessThanOrEqual(
      DAY_S * 1000,
    );

    const last = await Promise.race([
      watchToEnd(h.client, run!.id),
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 8 * DAY_S * 1000)),
    ]);
    // A run that did not finish in time must not spend the next test's days.
    if (last?.status !== RunStatus.SUCCEEDED) await h.client.stopRun({ runId: run!.id }).catch(() => {});
    const ended = Date.now();
    expect(last?.status).toBe(RunStatus.SUCCEEDED);

    const truth = (await (await fetch(`${h.cluster.sandboxUrl}/__sandbox/truth`)).json()) as {
      kinds: Record<string, { ids: string[]; malformed: string[] }>;
    };
    const accounts = await accountFor(
      h.database.db,
      { tenantId, source: "crm", sourceAccount: ACCOUNT, since },
      truth.kinds,
    );
    expect(accountingProblems(accounts)).toEqual([]);

    // No task failed, and none spent an attempt on a wait: every one finished on its first.
    const [tasks] = await h.database.db.execute<{ failed: string; most: number; total: string }>(sql`
      select count(*) filter (where status = 'failed') as failed, max(attempts) as most, count(*) as total
        from drover.tasks where run_id = ${run!.id}::uuid`);
    expect({ failed: Number(tasks!.failed), mostAttempts: tasks!.most }).toEqual({
      failed: 0,
      mostAttempts: 1,
    });

    const log = (await days()).filter((d) => d.endsAt > since.getTime() && d.startedAt < ended);
    // The resets the run lived through: the days that began after its first request.
    const firstSent = Math.min(...log.map((d) => d.firstAdmittedAt ?? Number.POSITIVE_INFINITY));
    const resets = log.filter((d) => d.startedAt > firstSent);
    const lines = log.map(
      (d) =>
        `day from ${new Date(d.startedAt).toISOString()}: ${d.admitted} admitted, ${d.spent}/${DAILY_BUDGET} tokens, ` +
        `${d.dailyRefusals} daily 429, ${d.burstRefusals} burst 429, ${d.blocked} 403, first request ` +
        (d.firstAdmittedAt === null
          ? "none"
          : `${((d.firstAdmittedAt - d.startedAt) / 1000).toFixed(1)} s in`),
    );
    console.log(`daily budget run over ${resets.length} resets:\n  ${lines.join("\n  ")}`);
    expect(resets.length).toBeGreaterThanOrEqual(3);
    for (const d of log) expect(d.blocked, "403 blocks").toBe(0);
    // The first day the run spends whole, the keeper finds the day's start: one probe per half
    // hour of the day after the spend, at most 48 refused. After it, it knows the day: at most one
    // wasted request per worker per reset.
    const learnedAfter = log.find((d) => d.spent > DAILY_BUDGET - 20)?.endsAt ?? Number.POSITIVE_INFINITY;
    for (const d of log) {
      const refused = d.dailyRefusals + d.burstRefusals;
      if (d.startedAt < learnedAfter) expect(refused, "probes refused").toBeLessThanOrEqual(48 + WORKERS);
      else expect(refused, "wasted requests in a day").toBeLessThanOrEqual(WORKERS);
    }
    // Every day the run spent whole (it waited for the reset) resumed within a few seconds of its
    // real start, 10 s after the rule's, the first reset included (its probes are spaced by the
    // refusals' Retry-After, up to 2 s; later days narrow it by a probe a day).
    for (const d of resets.slice(0, -1)) {
      expect(d.firstAdmittedAt, `the day from ${new Date(d.startedAt).toISOString()}`).not.toBeNull();
      expect(d.firstAdmittedAt! - d.startedAt).toBeLessThanOrEqual(5_000);
    }
  }, 300_000);

  it("holds two tenants' runs on one account to their daily shares of each day", async () => {
    const shares = { "share-a": 0.5, "share-b": 0.25 } as const;
    const started = Date.now();
    const runIds: string[] = [];
    for (const [tenantId, dailyShare] of Object.entries(shares)) {
      const { run } = await h.client.startRun({
        tenantId,
        source: "crm",
        sourceAccount: ACCOUNT,
        sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: `${tenantId}-token`, settings },
        dailyShare,
      });
      expect(run!.dailyShare).toBe(dailyShare);
      runIds.push(run!.id);
    }
    // Two whole days after the first reset, unless both are done before.
    const firstReset = nextReset(started);
    await until(
      "two days of shared budget",
      async () => {
        if (Date.now() > firstReset + 2 * DAY_S * 1000 + 500) return true;
        const runs = await Promise.all(runIds.map(async (runId) => (await h.client.getRun({ runId })).run!));
        return runs.every((r) => r.status !== RunStatus.RUNNING);
      },
      4 * DAY_S * 1000,
    );
    for (const runId of runIds) await h.client.stopRun({ runId }).catch(() => {});

    const log = (await days()).filter((d) => d.endsAt > started);
    console.log(
      `daily shares: ${log
        .map(
          (d) =>
            `${new Date(d.startedAt).toISOString()} a=${d.spentByToken["share-a-token"] ?? 0} b=${d.spentByToken["share-b-token"] ?? 0}`,
        )
        .join(", ")}`,
    );
    for (const d of log) {
      expect(d.spentByToken["share-a-token"] ?? 0).toBeLessThanOrEqual(shares["share-a"] * DAILY_BUDGET);
      expect(d.spentByToken["share-b-token"] ?? 0).toBeLessThanOrEqual(shares["share-b"] * DAILY_BUDGET);
      expect(d.blocked).toBe(0);
    }
    // Each run had its share of the first whole day.
    const whole = log.find((d) => d.startedAt >= firstReset);
    expect(whole?.spentByToken["share-a-token"]).toBeGreaterThan(0);
    expect(whole?.spentByToken["share-b-token"]).toBeGreaterThan(0);
  }, 300_000);
  it("resumes every run parked on a spent day within 10 s of the reset, the one that parked first included", async () => {
    const tenants = ["fair-a", "fair-b"];
    const started = Date.now();
    const runIds: string[] = [];
    for (const tenantId of tenants) {
      const { run } = await h.client.startRun({
        tenantId,
        source: "crm",
        sourceAccount: ACCOUNT,
        sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: `${tenantId}-token`, settings },
      });
      runIds.push(run!.id);
    }
    // Both runs need several days of this budget: they are both live through the two whole days
    // after the first reset, parking at each day's end and resuming at the next day's start.
    const firstReset = nextReset(started);
    await until(
      "two whole days after the first reset",
      async () => Date.now() > firstReset + 2 * DAY_S * 1000 + 500,
      4 * DAY_S * 1000,
    );
    const live = await Promise.all(runIds.map(async (runId) => (await h.client.getRun({ runId })).run!));
    for (const runId of runIds) await h.client.stopRun({ runId }).catch(() => {});
    expect(live.map((r) => r.status)).toEqual([RunStatus.RUNNING, RunStatus.RUNNING]);

    const whole = (await days()).filter(
      (d) => d.startedAt >= firstReset && d.endsAt <= firstReset + 2 * DAY_S * 1000,
    );
    console.log(
      `resumption after each reset: ${whole
        .map(
          (d) =>
            `${new Date(d.startedAt).toISOString()} ${tenants
              .map(
                (t) =>
                  `${t} ${(((d.firstAdmittedByToken[`${t}-token`] ?? Number.NaN) - d.startedAt) / 1000).toFixed(1)} s`,
              )
              .join(", ")}`,
        )
        .join("; ")}`,
    );
    expect(whole).toHaveLength(2);
    for (const d of whole) {
      expect(d.blocked).toBe(0);
      for (const t of tenants) {
        const first = d.firstAdmittedByToken[`${t}-token`];
        expect(first, `${t} in the day from ${new Date(d.startedAt).toISOString()}`).toBeDefined();
        expect(
          first! - d.startedAt,
          `${t} in the day from ${new Date(d.startedAt).toISOString()}`,
        ).toBeLessThanOrEqual(10_000);
      }
    }
  }, 300_000);
});
