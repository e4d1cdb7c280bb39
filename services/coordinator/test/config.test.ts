import { ConfigError } from "@drover/config";
import { describe, expect, it } from "vitest";
import { loadCoordinatorConfig } from "../src/config.js";

describe("the reaper interval", () => {
  it("is read from DROVER_REAPER_INTERVAL_MS, 2 s by default", () => {
    expect(loadCoordinatorConfig({}).DROVER_REAPER_INTERVAL_MS).toBe(2_000);
    expect(loadCoordinatorConfig({ DROVER_REAPER_INTERVAL_MS: "750" }).DROVER_REAPER_INTERVAL_MS).toBe(750);
  });

  it("still honours the deprecated DROVER_SWEEP_INTERVAL_MS, and the new name wins when both are set", () => {
    expect(loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "300" }).DROVER_REAPER_INTERVAL_MS).toBe(300);
    expect(
      loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "300", DROVER_REAPER_INTERVAL_MS: "900" })
        .DROVER_REAPER_INTERVAL_MS,
    ).toBe(900);
  });

  it("refuses a bad deprecated value under its own name", () => {
    expect(() => loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "5" })).toThrow(ConfigError);
    expect(() => loadCoordinatorConfig({ DROVER_SWEEP_INTERVAL_MS: "5" })).toThrow(
      /DROVER_SWEEP_INTERVAL_MS: must be at least 100/,
    );
  });
});
