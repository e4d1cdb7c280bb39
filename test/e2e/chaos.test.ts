import { describe, expect, it } from "vitest";
import { chaosSeed, EXACT, runChaos } from "../chaos/scenario.js";
import { SMALL, SMALL_FOLLOW_WEBHOOKS, SMALL_HUBSPOT } from "../chaos/schedules.js";

describe("chaos, small", () => {
  it("one kill of each kind: nothing lost, duplicated or unexpected, no verification mismatch", async () => {
    const report = await runChaos({ ...SMALL, seed: chaosSeed() });
    expect(report.problems).toEqual([]);
    expect(report.checks).toMatchObject(EXACT);
  }, 180_000);

  it("a follow run fed by webhooks through one kill of each kind while the source changes: the changes arrive by their events, and the run is in step with the source at cutover", async () => {
    const report = await runChaos({ ...SMALL_FOLLOW_WEBHOOKS, seed: chaosSeed() });
    expect(report.options.follow).toBeDefined();
    expect(report.problems).toEqual([]);
    expect(report.checks).toMatchObject(EXACT);
  }, 240_000);

  it("a HubSpot import through one kill of each kind: nothing lost, duplicated or unexpected, no verification mismatch", async () => {
    const report = await runChaos({ ...SMALL_HUBSPOT, seed: chaosSeed() });
    expect(report.sourceRows).toBeGreaterThanOrEqual(2_500);
    expect(report.problems).toEqual([]);
    expect(report.checks).toMatchObject(EXACT);
  }, 180_000);
});
