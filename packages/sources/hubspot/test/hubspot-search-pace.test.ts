import { describe, expect, it } from "vitest";
import { SearchPace } from "../src/search-pace.js";

/** HubSpot admits five searches a second per account, whichever process sends them. */
describe("the search pace", () => {
  it("counts another process's searches it is told of: the sixth of a second waits until the first leaves it", async () => {
    const pace = new SearchPace(5);
    const now = Date.now();
    // A catch-up task in another worker answered five searches just now, then handed its walk on.
    pace.remember([now - 900, now - 50, now - 40, now - 30, now - 20]);
    const started = Date.now();
    const sentAt = await pace.run(async () => Date.now());
    // The oldest of the five leaves the second at now + 100 ms: not before.
    expect(sentAt - started).toBeGreaterThanOrEqual(90);
    expect(sentAt).toBeGreaterThanOrEqual(now + 100);
  });

  it("forgets what is more than a second old, and hands on only its last second's answers", async () => {
    const pace = new SearchPace(5);
    const now = Date.now();
    pace.remember([now - 5_000, now - 1_500]);
    const started = Date.now();
    await pace.run(async () => undefined);
    expect(Date.now() - started).toBeLessThan(50);
    const handed = pace.answeredLastSecond();
    expect(handed).toHaveLength(1);
    expect(handed[0]!.at).toBeGreaterThanOrEqual(started);
    expect(handed[0]!.by).toBe(pace.id);
  });

  it("counts a search once when its mark comes back to the process that answered it, or twice from elsewhere", async () => {
    const here = new SearchPace(5);
    const there = new SearchPace(5);
    for (let i = 0; i < 3; i++) await here.run(async () => undefined);
    // The chain goes here → there → here: each hands on every search it knows of.
    there.remember(here.answeredLastSecond());
    await there.run(async () => undefined);
    there.remember(here.answeredLastSecond());
    here.remember(there.answeredLastSecond());
    expect(here.answeredLastSecond()).toHaveLength(4);
    expect(there.answeredLastSecond()).toHaveLength(4);
    // One more search fits the second here, without waiting for any to leave it.
    const started = Date.now();
    await here.run(async () => undefined);
    expect(Date.now() - started).toBeLessThan(50);
    // The sixth must wait: five were answered in the last second.
    const sixth = Date.now();
    await here.run(async () => undefined);
    expect(Date.now() - sixth).toBeGreaterThanOrEqual(200);
  });
});
