import { describe, expect, it } from "vitest";
import { type ChaosOptions, chaosSeed, EXACT, natsNodeNemesis, runChaos } from "../chaos/scenario.js";

/**
 * A migration through a three-node NATS cluster (the stream at three replicas, as in production)
 * while the node leading the task stream is SIGKILLed mid-run: clients move to the other servers,
 * the stream elects a new leader, and the run finishes with nothing lost, duplicated or unexpected.
 * The longer run (kill, restart, kill another) is `pnpm test:chaos`.
 */
const ONE_NODE_KILLED: Omit<ChaosOptions, "seed"> = {
  variant: "nats-node",
  nats: "cluster",
  sandbox: {
    organizations: 200,
    persons: 500,
    deals: 300,
    leads: 200,
    activities: 400,
    notes: 300,
    "mail-per-deal-max": 1,
    "heavy-mail-deal-rate": 0.01,
    "malformed-rate": 0.01,
    "transient-error-rate": 0.01,
    "latency-ms": 5,
  },
  coordinators: 2,
  workers: 2,
  laneWidth: 4,
  settings: { pageSize: "50", stripes: "3" },
  env: {
    DROVER_SWEEP_INTERVAL_MS: "500",
    DROVER_STALE_TASK_MS: "5000",
    DROVER_REDISPATCH_AFTER_MS: "6000",
    DROVER_SHUTDOWN_GRACE_MS: "3000",
    DROVER_VERIFY_SAMPLE_SIZE: "40",
  },
  nemesis: natsNodeNemesis([[0.3, 0.4]]),
  stallTimeoutMs: 45_000,
  runDeadlineMs: 150_000,
  verifyDeadlineMs: 30_000,
};

describe("a three-node NATS cluster", () => {
  it("loses, duplicates and invents nothing when the stream's leader node is killed mid-run", async () => {
    const report = await runChaos({ ...ONE_NODE_KILLED, seed: chaosSeed() });
    expect(report.problems).toEqual([]);
    expect(report.faultCounts["kill-nats-node"]).toBe(1);
    expect(report.checks).toMatchObject(EXACT);
  }, 240_000);
});
