import { describe, expect, it } from "vitest";
import { parseEnv, SHARED_SETTINGS, settingsDisagreements, sharedOptions, z } from "../src/index.js";

const service = z.object({ ...SHARED_SETTINGS, OTHER: z.string().default("x") });

describe("settings shared by coordinator and workers", () => {
  it("have one definition: the same defaults and bounds wherever a service reads them", () => {
    expect(sharedOptions(parseEnv(service, {}))).toEqual({
      laneWidth: 4,
      queuePrefix: "drover",
      maxAttempts: 8,
      notesCap: 50_000,
      staleTaskMs: 90_000,
    });
    expect(() => parseEnv(service, { DROVER_LANE_WIDTH: "0" })).toThrow(
      /DROVER_LANE_WIDTH: must be at least 1/,
    );
  });

  it("name each variable whose values differ, with both values", () => {
    const coordinator = sharedOptions(parseEnv(service, {}));
    const worker = { ...coordinator, queuePrefix: "other", maxAttempts: 2 };
    expect(settingsDisagreements(worker, coordinator)).toEqual([
      'DROVER_QUEUE_PREFIX: this worker has "other" but the coordinator "drover"; set the same value on both',
      "DROVER_MAX_ATTEMPTS: this worker has 2 but the coordinator 8; set the same value on both",
    ]);
    expect(settingsDisagreements(coordinator, coordinator)).toEqual([]);
  });
});
