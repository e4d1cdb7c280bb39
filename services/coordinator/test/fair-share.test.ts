import { describe, expect, it } from "vitest";
import { fairShares, type RunDemand, shareCeiling } from "../src/fair-share.js";

const run = (
  runId: string,
  tenantId: string,
  ready: number,
  running = 0,
  queued = 0,
  present = true,
): RunDemand => ({ runId, tenantId, running, queued, ready, present });

const shares = (runs: RunDemand[], slots: number, tenantCap = 0) =>
  Object.fromEntries(fairShares(runs, { slots, tenantCap, reserve: false }));
/** Shares while the workers are busy: every present run's equal share is kept for it. */
const reserved = (runs: RunDemand[], slots: number, tenantCap = 0) =>
  Object.fromEntries(fairShares(runs, { slots, tenantCap, reserve: true }));

describe("fair shares of the pool's lane slots", () => {
  it("equal runs get equal shares of the live slots", () => {
    const runs = Array.from({ length: 8 }, (_, i) => run(`r${i}`, `t${i}`, 100));
    expect(Object.values(shares(runs, 16))).toEqual(Array(8).fill(2));
  });

  it("a run that needs less than an equal share keeps what it needs; the rest goes to the others", () => {
    expect(shares([run("large", "a", 500), run("small", "b", 2)], 8)).toEqual({ large: 6, small: 2 });
  });

  it("a run alone may use every slot of the pool", () => {
    expect(shares([run("only", "a", 500)], 40)).toEqual({ only: 40 });
  });

  it("what a run already has in flight counts towards its share; nothing is taken back", () => {
    // The large run holds the whole pool when a small one arrives: its target drops below what it holds.
    expect(shares([run("large", "a", 400, 8, 1), run("small", "b", 6)], 8)).toEqual({ large: 4, small: 4 });
  });

  it("the tenant cap bounds a tenant's runs together, and the slots it leaves go to other tenants", () => {
    const runs = [run("a1", "a", 100), run("a2", "a", 100), run("b1", "b", 100), run("c1", "c", 2)];
    // a's two runs share its cap of 4, c needs 2, b (capped too) gets 4: two slots stay free.
    expect(shares(runs, 14, 4)).toEqual({ a1: 2, a2: 2, b1: 4, c1: 2 });
    expect(shares(runs, 14, 8)).toEqual({ a1: 4, a2: 4, b1: 4, c1: 2 });
  });

  it("runs with nothing to do get nothing", () => {
    expect(shares([run("waiting", "a", 0), run("busy", "b", 100)], 4)).toEqual({ waiting: 0, busy: 4 });
  });

  it("an uneven split gives the odd slots to the runs with the fewest running tasks", () => {
    expect(shares([run("ahead", "a", 100, 3), run("behind", "b", 100, 1)], 5)).toEqual({
      ahead: 2,
      behind: 3,
    });
  });

  it("while the workers are busy, a run that needs less keeps its equal share free instead of lending it", () => {
    expect(reserved([run("large", "a", 500), run("small", "b", 1)], 8)).toEqual({ large: 4, small: 1 });
    // Between two phases it wants nothing this instant, and still holds its share.
    expect(reserved([run("large", "a", 500), run("small", "b", 0)], 8)).toEqual({ large: 4, small: 0 });
  });

  it("while the workers are busy, a run parked until later reserves nothing", () => {
    const parked = run("parked", "b", 0, 0, 0, false);
    expect(reserved([run("large", "a", 500), parked], 8)).toEqual({ large: 8, parked: 0 });
  });

  it("while the workers are busy, runs that all want more split the pool as when lending", () => {
    const runs = [run("a", "a", 100), run("b", "b", 100), run("c", "c", 100)];
    expect(reserved(runs, 8)).toEqual(shares(runs, 8));
    expect(Object.values(reserved(runs, 8)).reduce((x, y) => x + y)).toBe(8);
  });

  it("while the workers are busy, the tenant cap still bounds a tenant and the shares are taken within it", () => {
    const runs = [run("a1", "a", 100), run("a2", "a", 100), run("b1", "b", 1)];
    // 12 slots, three present runs: 4 each, but tenant a is capped at 6 together; b keeps 4, uses 1.
    expect(reserved(runs, 12, 6)).toEqual({ a1: 3, a2: 3, b1: 1 });
  });

  it("while the workers are busy, tasks above an equal split of the pool rounded up yield unprompted; never while lending or alone", () => {
    const runs = [run("a", "a", 100), run("b", "b", 100), run("c", "c", 1)];
    expect(shareCeiling(runs, { slots: 8, tenantCap: 0, reserve: true })).toBe(3);
    // Between phases the small run is still present.
    expect(
      shareCeiling([run("a", "a", 100), run("b", "b", 0)], { slots: 8, tenantCap: 0, reserve: true }),
    ).toBe(4);
    expect(shareCeiling(runs, { slots: 8, tenantCap: 0, reserve: false })).toBeNull();
    expect(shareCeiling([run("a", "a", 100)], { slots: 8, tenantCap: 0, reserve: true })).toBeNull();
    const parked = run("p", "p", 0, 0, 0, false);
    expect(shareCeiling([run("a", "a", 100), parked], { slots: 8, tenantCap: 0, reserve: true })).toBeNull();
  });
});
