import { describe, expect, it } from "vitest";
import { chaosSeed, EXACT, runChaos } from "../chaos/scenario.js";
import { SMALL } from "../chaos/schedules.js";

describe("chaos, small", () => {
  it("one kill of each kind: nothing lost, duplicated or unexpected, no verification mismatch", async () => {
    const report = await runChaos({ ...SMALL, seed: chaosSeed() });
    expect(report.problems).toEqual([]);
    expect(report.checks).toMatchObject(EXACT);
  }, 180_000);
});
