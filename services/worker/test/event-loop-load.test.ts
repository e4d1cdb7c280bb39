import { describe, expect, it } from "vitest";
import { BUSY_ABOVE, EventLoopLoad, IDLE_BELOW, IDLE_SAMPLES, nextBusy } from "../src/event-loop-load.js";

const spin = (ms: number) => {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // Nothing but CPU, as a worker parsing and writing pages flat out.
  }
};
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a worker's event-loop load", () => {
  it("turns busy on one sample above the upper threshold, idle only when the recent mean is below the lower one", () => {
    expect(nextBusy(false, BUSY_ABOVE, 0.9)).toBe(false);
    expect(nextBusy(false, 0.81, 0.3)).toBe(true);
    // Between the thresholds the state holds, whichever it is: a swinging reading moves nothing.
    expect(nextBusy(false, 0.6, 0.6)).toBe(false);
    expect(nextBusy(true, 0.6, 0.6)).toBe(true);
    // One quiet sample does not make a busy worker idle; a quiet second does.
    expect(nextBusy(true, 0.1, 0.7)).toBe(true);
    expect(nextBusy(true, 0.1, IDLE_BELOW)).toBe(true);
    expect(nextBusy(true, 0.1, 0.49)).toBe(false);
  });

  it("reads the loop's own utilization: a spin makes it busy at once, a quiet second makes it idle, each change reported once", async () => {
    const changes: boolean[] = [];
    const load = new EventLoopLoad((busy) => changes.push(busy), 60_000);
    load.start();
    spin(200);
    expect(load.sample()).toBeGreaterThan(BUSY_ABOVE);
    expect(load.busy).toBe(true);
    // Quiet samples, one at a time: busy until the mean of the last few is low.
    let quiet = 0;
    while (load.busy && quiet < IDLE_SAMPLES + 2) {
      await wait(200);
      expect(load.sample()).toBeLessThan(IDLE_BELOW);
      quiet++;
    }
    expect(load.busy).toBe(false);
    expect(quiet).toBeGreaterThan(1);
    await wait(100);
    load.sample();
    load.stop();
    expect(changes).toEqual([true, false]);
  });
});
