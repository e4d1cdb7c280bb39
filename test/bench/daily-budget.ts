import type { DayLog } from "@drover/crm-sandbox";
import { openBenchCluster } from "./harness.js";
import type { Scenario, ScenarioResult } from "./scenario.js";

/**
 * daily_wasted_requests_per_reset, daily_resume_lag_s and daily_probes_refused: an import that spans
 * several "days" of a sandbox whose day lasts DAY_S seconds and starts a third of a day past the
 * moment the account's rule names (crm settings dailyReset UTC, daySeconds DAY_S: the sandbox's
 * day begins at 08:00 UTC scaled, midnight in Los Angeles), whose daily budget covers about a third
 * of the account (the account of test/e2e/daily-budget.test.ts), by two workers of lane width 3.
 * Nothing in an answer says when the day returns: the keeper learns it by probing.
 *
 * probes refused = the worst day's refused requests up to the end of the first day the run spends
 * whole, where the keeper searches the day's start (goal: at most 48, one per half hour of the
 * day). After it: wasted = the worst day's refused requests (429s of either kind and 403s) ÷
 * workers, the goal at most one per worker per reset. Resume lag = the longest wait, over the
 * resets the run lived through (the first included), from a reset to the first request the
 * sandbox admitted after it.
 */

const WORKERS = 2;
const LANE_WIDTH = 3;

function workload(quick: boolean) {
  // Quick: half the account and 4 s days (a day's tokens go in its first second or two, the rest
  // of the day is waiting): the run still crosses about four resets, in a seventh of the time.
  const scale = quick ? 0.5 : 1;
  const rows = (n: number) => Math.max(1, Math.round(n * scale));
  const daySeconds = quick ? 4 : 30;
  return {
    daySeconds,
    sandbox: {
      seed: 42,
      organizations: rows(60),
      persons: rows(120),
      deals: rows(100),
      leads: rows(40),
      activities: rows(100),
      notes: rows(100),
      "mail-per-deal-max": 2,
      "list-include-body": 0,
      "burst-limit": 40,
      "daily-budget": Math.round(950 * scale),
      "daily-reset-seconds": daySeconds,
      // A third of a day past the rule's midnight: 8 hours, a half hour of the day the keeper probes.
      "daily-reset-offset-seconds": Math.round(daySeconds / 3),
      "latency-ms": 5,
    },
    settings: { pageSize: "25", dealsPerMailTask: "2", dailyReset: "UTC", daySeconds: String(daySeconds) },
  };
}

/** The first day whose budget was spent (less than a list's 20 tokens left), if any. */
export function firstSpentDay(days: DayLog[], budget: number): DayLog | undefined {
  return days.find((d) => d.spent > budget - 20);
}

export const dailyBudgetScenario: Scenario & {
  run(context?: { quick?: boolean }): Promise<ScenarioResult>;
} = {
  name: "daily_budget",
  selects: ["daily_wasted_requests_per_reset", "daily_resume_lag_s", "daily_probes_refused"],
  async run(context?: { quick?: boolean }): Promise<ScenarioResult> {
    const { daySeconds, sandbox, settings } = workload(context?.quick === true);
    const bench = await openBenchCluster({
      name: "daily-budget",
      workers: WORKERS,
      laneWidth: LANE_WIDTH,
      sandbox,
      env: { DROVER_REAPER_INTERVAL_MS: "500" },
    });
    try {
      const outcome = await bench.runToEnd(
        { tenantId: "bench", sourceAccount: "bench-daily", kinds: [], settings },
        20 * daySeconds * 1000,
      );
      const days = (outcome.stats as { days?: DayLog[] }).days ?? [];
      const lived = days.filter((d) => d.endsAt > outcome.startedAt && d.startedAt < outcome.finishedAt);
      const firstSent = Math.min(...lived.map((d) => d.firstAdmittedAt ?? Number.POSITIVE_INFINITY));
      const resets = lived.filter((d) => d.startedAt > firstSent);
      const refused = (d: DayLog) => d.dailyRefusals + d.burstRefusals + d.blocked;
      // The keeper searches the day's start on the first day the run spends whole (the probes go
      // out after the spend, the reset is learned at its end); every later day it knows it.
      const learnedAfter = firstSpentDay(lived, sandbox["daily-budget"])?.endsAt ?? Number.POSITIVE_INFINITY;
      const wasted = lived.filter((d) => d.startedAt >= learnedAfter).map(refused);
      const learning = lived.filter((d) => d.startedAt < learnedAfter).map(refused);
      const lags = resets.map((d) =>
        d.firstAdmittedAt === null ? daySeconds : (d.firstAdmittedAt - d.startedAt) / 1000,
      );
      if (resets.length === 0) throw new Error("the run ended within one day: no reset to measure");
      return {
        figures: {
          daily_wasted_requests_per_reset: Math.max(0, ...wasted) / WORKERS,
          daily_resume_lag_s: Math.max(...lags),
          daily_probes_refused: Math.max(0, ...learning),
        },
        settings: { workers: WORKERS, laneWidth: LANE_WIDTH, sandbox, crmSettings: settings },
        details: {
          resets: resets.length,
          days: lived,
          wastedPerReset: wasted,
          refusedBeforeFirstReset: learning,
          resumeLagsSeconds: lags,
          runSeconds: (outcome.finishedAt - outcome.startedAt) / 1000,
          logs: bench.cluster.logDir,
        },
      };
    } finally {
      bench.closeLater();
    }
  },
};
