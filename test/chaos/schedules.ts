import type { ChaosOptions } from "./scenario.js";

/**
 * The small chaos run inside `pnpm test`: one fault of each kind during a migration of about
 * 3,000 source rows (the full one is `pnpm test:chaos`). The worker is SIGSTOPped past the reaper's
 * stale-task time rather than the 30 s ack_wait, to keep the suite short; the reaper hands its tasks
 * to others, and the frozen worker's late writes are fenced off when it wakes.
 */
export const SMALL: Omit<ChaosOptions, "seed"> = {
  variant: "small",
  sandbox: {
    organizations: 300,
    persons: 800,
    deals: 400,
    leads: 300,
    activities: 600,
    notes: 450,
    // Mail is one list call per deal and one get per message: kept light, it is the slow phase.
    "mail-per-deal-max": 1,
    "heavy-mail-deal-rate": 0.01,
    "malformed-rate": 0.01,
    "transient-error-rate": 0.02,
    "latency-ms": 5,
  },
  coordinators: 2,
  workers: 3,
  laneWidth: 4,
  // Every kind's count is a multiple of the page size: a page of one malformed row would fail its
  // task ("every row failed"), and the run with it, though the row is accounted for.
  settings: { pageSize: "50", stripes: "3" },
  env: {
    DROVER_SWEEP_INTERVAL_MS: "500",
    DROVER_STALE_TASK_MS: "5000",
    DROVER_REDISPATCH_AFTER_MS: "6000",
    DROVER_SHUTDOWN_GRACE_MS: "3000",
    // 40 rows per kind compared field by field (the full run compares the default 200).
    DROVER_VERIFY_SAMPLE_SIZE: "40",
  },
  // Points of progress (share of source rows accounted for), not seconds: see ChaosOptions.
  nemesis: {
    workerKills: { from: 0.3, every: null },
    killLeaderAt: [[0.45, 0.45]],
    restartNatsAt: [[0.6, 0.6]],
    natsDownMs: 1_000,
    restartPostgresAt: [[0.72, 0.72]],
    postgresDownMs: 2_000,
    terminateDbAt: [[0.35, 0.35]],
    pauseWorkerAt: [0.15, 0.15],
    pauseForMs: 6_500,
  },
  // Its own PostgreSQL server, which restart-postgres restarts (a fast shutdown or a crash).
  postgres: "private",
  stallTimeoutMs: 30_000,
  runDeadlineMs: 100_000,
  verifyDeadlineMs: 30_000,
};

/**
 * The small schedule for a run that follows its source: the customer edits, adds and deletes rows
 * (three, two and two of each kind) at 35–65 % of the run's progress, while the faults keep coming;
 * the run is completed once a pass has caught up, and must hold the source as it is then.
 */
export const SMALL_FOLLOW: Omit<ChaosOptions, "seed"> = {
  ...SMALL,
  variant: "small-follow",
  sandbox: { ...SMALL.sandbox, "change-edits": 3, "change-adds": 2, "change-deletes": 2 },
  follow: { intervalSeconds: 2, changeAt: [0.35, 0.65] },
};

/**
 * `pnpm test:chaos -- --soak <duration>`: the small schedule again and again, a fresh seed each
 * run, fresh runs and follow runs in turn, with a worker killed every 10–20 % of the run's progress
 * on top of one fault of every other kind (the database restarted among them), until the duration
 * is spent.
 */
/**
 * The follow run again, its change feed the source's webhooks (a receiver of its own): the round
 * must reach the product through the events while workers and the leader are killed.
 */
export const SMALL_FOLLOW_WEBHOOKS: Omit<ChaosOptions, "seed"> = {
  ...SMALL_FOLLOW,
  variant: "small-follow-webhooks",
  follow: { ...SMALL_FOLLOW.follow!, webhooks: true },
};

export const SOAK: Omit<ChaosOptions, "seed"> = {
  ...SMALL,
  variant: "soak",
  nemesis: { ...SMALL.nemesis, workerKills: { from: 0.2, every: [0.1, 0.2] } },
};
export const SOAK_FOLLOW: Omit<ChaosOptions, "seed"> = {
  ...SMALL_FOLLOW,
  variant: "soak-follow",
  nemesis: SOAK.nemesis,
};
export const SOAK_FOLLOW_WEBHOOKS: Omit<ChaosOptions, "seed"> = {
  ...SMALL_FOLLOW_WEBHOOKS,
  variant: "soak-follow-webhooks",
  nemesis: SOAK.nemesis,
};

/**
 * The small schedule's faults during a HubSpot import (issue 35): companies, contacts, deals and the
 * five engagement types with their associations, some archived, against HubSpot's sandbox and its
 * rolling 10-second window (a Professional account's 190), which the workers share.
 */
export const SMALL_HUBSPOT: Omit<ChaosOptions, "seed"> = {
  ...SMALL,
  variant: "small-hubspot",
  source: "hubspot",
  sandbox: {
    companies: 400,
    contacts: 1000,
    deals: 600,
    engagements: 150,
    "custom-properties": 10,
    "archived-rate": 0.05,
    "latency-ms": 5,
    "ten-second-limit": 190,
  },
  settings: {},
};
