import { ConfigError } from "@drover/config";
import { describe, expect, it } from "vitest";
import { loadCoordinatorConfig } from "../src/config.js";

describe("the reaper interval", () => {
  it("is read from DROVER_REAPER_INTERVAL_MS, 2 s by default", () => {
    expect(loadCoordinatorConfig({}).reaperIntervalMs).toBe(2_000);
    expect(loadCoordinatorConfig({ DROVER_REAPER_INTERVAL_MS: "750" }).reaperIntervalMs).toBe(750);
  });

  it("still honours the deprecated DROVER_SWEEP_INTERVAL_MS, and the new name wins when both are set", () => {
    expect(loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "300" }).reaperIntervalMs).toBe(300);
    expect(
      loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "300", DROVER_REAPER_INTERVAL_MS: "900" })
        .reaperIntervalMs,
    ).toBe(900);
  });

  it("refuses a bad deprecated value under its own name", () => {
    expect(() => loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "5" })).toThrow(ConfigError);
    expect(() => loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "5" })).toThrow(
      /DROVER_SWEEP_INTERVAL_MS: must be at least 100/,
    );
  });
});

describe("the leader timeout", () => {
  it("is 15 s by default, and read from DROVER_LEADER_TIMEOUT_MS", () => {
    expect(loadCoordinatorConfig({}).leaderTimeoutMs).toBe(15_000);
    expect(loadCoordinatorConfig({ DROVER_LEADER_TIMEOUT_MS: "6000" }).leaderTimeoutMs).toBe(6_000);
  });

  it("refuses a timeout shorter than three reaper intervals, saying what to change", () => {
    expect(() =>
      loadCoordinatorConfig({ DROVER_LEADER_TIMEOUT_MS: "5000", DROVER_REAPER_INTERVAL_MS: "2000" }),
    ).toThrow(
      "DROVER_LEADER_TIMEOUT_MS (5000) must be at least 3× DROVER_REAPER_INTERVAL_MS (2000), the lease being refreshed once per reaper pass: raise DROVER_LEADER_TIMEOUT_MS to at least 6000 or lower DROVER_REAPER_INTERVAL_MS",
    );
  });
});

describe("the fair-share mode", () => {
  it("is adaptive by default, and read from DROVER_FAIR_SHARE", () => {
    expect(loadCoordinatorConfig({}).fairShare).toBe("adaptive");
    expect(loadCoordinatorConfig({ DROVER_FAIR_SHARE: "reserve" }).fairShare).toBe("reserve");
  });

  it("refuses an unknown mode, naming the ones it takes", () => {
    expect(() => loadCoordinatorConfig({ DROVER_FAIR_SHARE: "fair" })).toThrow(
      /DROVER_FAIR_SHARE: must be adaptive, lend or reserve \(got "fair"\)/,
    );
  });
});
