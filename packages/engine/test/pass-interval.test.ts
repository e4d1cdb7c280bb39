import type { RunFollow } from "@drover/db";
import { describe, expect, it } from "vitest";
import { passIntervalSeconds } from "../src/run-transitions.js";

const follow = (over: Partial<RunFollow> = {}): RunFollow => ({
  intervalSeconds: 300,
  cutoverAt: null,
  passes: [],
  ...over,
});

describe("the time between a follow run's passes", () => {
  it("is the interval asked for while the run polls", () => {
    expect(passIntervalSeconds(follow())).toBe(300);
    expect(
      passIntervalSeconds(
        follow({
          feed: { mode: "polling", reason: "no public URL", reconcileSeconds: null, lastEventAt: null },
        }),
      ),
    ).toBe(300);
  });

  it("is the rare reconcile while webhooks feed the run, unless the interval asked for is longer", () => {
    const feed = { mode: "webhooks" as const, reason: null, reconcileSeconds: 3_600, lastEventAt: null };
    expect(passIntervalSeconds(follow({ feed }))).toBe(3_600);
    expect(passIntervalSeconds(follow({ intervalSeconds: 7_200, feed }))).toBe(7_200);
  });
});
