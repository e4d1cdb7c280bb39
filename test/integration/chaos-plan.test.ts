import { describe, expect, it } from "vitest";
import { type ChaosOptions, plan, rng } from "../chaos/scenario.js";

const options = {
  nemesis: {
    workerKills: { from: 0.03, every: [0.04, 0.07] },
    killLeaderAt: [[0.2, 0.3]],
    restartNatsAt: [[0.35, 0.5]],
    natsDownMs: 2_000,
    terminateDbAt: [
      [0.1, 0.2],
      [0.55, 0.7],
    ],
    pauseWorkerAt: [0.01, 0.04],
    pauseForMs: 35_000,
  },
  stallTimeoutMs: 1_000,
  runDeadlineMs: 1_000,
} as unknown as ChaosOptions;

describe("the chaos plan", () => {
  it("is decided by the seed alone, at points of progress: deadlines and run time change nothing", () => {
    const once = plan(options, rng(4258264582));
    const slowerMachine = plan(
      { ...options, stallTimeoutMs: 90_000, runDeadlineMs: 900_000 },
      rng(4258264582),
    );
    expect(slowerMachine).toEqual(once);
    expect(plan(options, rng(7))).not.toEqual(once);
    for (const f of once) {
      expect(f.at).toBeGreaterThan(0);
      expect(f.at).toBeLessThan(0.9);
    }
    const kinds = once.map((f) => f.kind);
    expect(kinds.filter((k) => k === "kill-worker").length).toBeGreaterThanOrEqual(12);
    expect(new Set(kinds)).toEqual(
      new Set(["kill-worker", "kill-leader", "restart-nats", "terminate-db-connections", "pause-worker"]),
    );
  });
});
