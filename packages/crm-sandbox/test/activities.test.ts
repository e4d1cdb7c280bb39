import { describe, expect, it } from "vitest";
import { sandbox, walk } from "./helpers.js";

describe("activities owner filter", () => {
  it("returns only the token owner's activities unless user_id=0 is passed", async () => {
    const s = await sandbox({ seed: 6, activities: 800 });
    const truth = s.truth(["activities"]).kinds.activities;
    const mine = await walk(s, "/v1/activities", 100);
    const everyone = await walk(s, "/v1/activities?user_id=0", 500);
    expect(everyone.length).toBe(800);
    expect(mine.length).toBe(truth.ownedByTokenUser);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.length).toBeLessThan(everyone.length / 2);
    expect(mine.every((a) => a.user_id === 1)).toBe(true);
    expect(new Set(everyone.map((a) => a.user_id)).size).toBeGreaterThan(1);
  });

  it("filters by another owner when user_id names one", async () => {
    const s = await sandbox({ seed: 6, activities: 300 });
    const theirs = await walk(s, "/v1/activities?user_id=3", 100);
    expect(theirs.length).toBeGreaterThan(0);
    expect(theirs.every((a) => a.user_id === 3)).toBe(true);
  });
});
