import { describe, expect, it } from "vitest";
import { parseEnv, SHARED_SETTINGS, settingsDisagreements, sharedSettingsOf, z } from "../src/index.js";

const service = z.object({ ...SHARED_SETTINGS, OTHER: z.string().default("x") });

describe("settings shared by coordinator and workers", () => {
  it("have one definition: the same defaults and bounds wherever a service reads them", () => {
    expect(sharedSettingsOf(parseEnv(service, {}))).toEqual({
      DROVER_LANE_WIDTH: 4,
      DROVER_QUEUE_PREFIX: "drover",
      DROVER_MAX_ATTEMPTS: 8,
      DROVER_NOTES_CAP: 50_000,
      DROVER_STALE_TASK_MS: 90_000,
    });
    expect(() => parseEnv(service, { DROVER_LANE_WIDTH: "0" })).toThrow(
      /DROVER_LANE_WIDTH: must be at least 1/,
    );
  });

  it("name each variable whose values differ, with both values", () => {
    const coordinator = sharedSettingsOf(parseEnv(service, {}));
    const worker = { ...coordinator, DROVER_QUEUE_PREFIX: "other", DROVER_MAX_ATTEMPTS: 2 };
    expect(settingsDisagreements(worker, coordinator)).toEqual([
      'DROVER_QUEUE_PREFIX: this worker has "other" but the coordinator "drover"; set the same value on both',
      "DROVER_MAX_ATTEMPTS: this worker has 2 but the coordinator 8; set the same value on both",
    ]);
    expect(settingsDisagreements(coordinator, coordinator)).toEqual([]);
  });
});
