import { describe, expect, it } from "vitest";
import { type ChaosOptions, chaosSeed, EXACT, natsNodeNemesis, runChaos } from "./scenario.js";

/**
 * `pnpm test:chaos`: a migration of about 6,000 source rows through a three-node NATS cluster (the
 * task stream at three replicas) while the nemesis SIGKILLs the node leading the stream, starts it
 * again once the run has moved on (it must catch up before the next fault), then SIGKILLs another
 * node, the stream's new leader where it can. Two coordinators and three workers hold the cluster's
 * server list and move between its nodes. Nothing may be lost, duplicated or unexpected.
 * `pnpm test` runs the short version (one node killed): e2e/nats-cluster.test.ts.
 */
const KILL_RESTART_KILL: Omit<ChaosOptions, "seed"> = {
  variant: "nats-cluster",
  nats: "cluster",
  sandbox: {
    organizations: 600,
    persons: 1600,
    deals: 800,
    leads: 600,
    activities: 1200,
    notes: 900,
    "mail-per-deal-max": 1,
    "heavy-mail-deal-rate": 0.01,
    "malformed-rate": 0.01,
    "transient-error-rate": 0.02,
    "latency-ms": 5,
  },
  coordinators: 2,
  workers: 3,
  laneWidth: 4,
  settings: { pageSize: "50", stripes: "4" },
  env: {
    DROVER_SWEEP_INTERVAL_MS: "500",
    DROVER_STALE_TASK_MS: "5000",
    DROVER_REDISPATCH_AFTER_MS: "6000",
    DROVER_SHUTDOWN_GRACE_MS: "3000",
    DROVER_VERIFY_SAMPLE_SIZE: "60",
  },
  nemesis: natsNodeNemesis(
    [
      [0.15, 0.25],
      [0.55, 0.7],
    ],
    [[0.35, 0.45]],
  ),
  stallTimeoutMs: 60_000,
  runDeadlineMs: 400_000,
  verifyDeadlineMs: 40_000,
};

describe("chaos, NATS cluster", () => {
  it("loses, duplicates and invents nothing while one node is killed, restarted, then another killed", async () => {
    const report = await runChaos({ ...KILL_RESTART_KILL, seed: chaosSeed() });
    expect(report.problems).toEqual([]);
    expect(report.faults.map((f) => f.kind)).toEqual([
      "kill-nats-node",
      "restart-nats-node",
      "kill-nats-node",
    ]);
    // Another node the second time: the first came back and the stream's leader moved.
    const [first, , second] = report.faults;
    expect(second!.target!.split(" ")[0]).not.toBe(first!.target!.split(" ")[0]);
    expect(report.checks).toMatchObject(EXACT);
  });
});
