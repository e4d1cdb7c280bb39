import { describe, expect, it } from "vitest";
import { median, ratiosByRound, roundOrder, spreadOf, spreadRange } from "./rounds.js";

describe("figures measured in rounds", () => {
  it("take the median of the rounds, not the luckiest one", () => {
    expect(median([0.9, 0.6, 0.7])).toBe(0.7);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(() => median([])).toThrow(/no values/);
  });

  it("turn the contenders' order each round, so each runs first once in as many rounds as there are", () => {
    const rounds = [0, 1, 2].map((r) => roundOrder(["pipe", "walk", "streamed"], r));
    expect(rounds).toEqual([
      ["pipe", "walk", "streamed"],
      ["walk", "streamed", "pipe"],
      ["streamed", "pipe", "walk"],
    ]);
    expect(new Set(rounds.map((r) => r[0]))).toEqual(new Set(["pipe", "walk", "streamed"]));
  });

  it("compare two contenders within each round: the den's seconds over the num's", () => {
    expect(ratiosByRound([10, 20], [8, 10])).toEqual([0.8, 0.5]);
    expect(() => ratiosByRound([1], [1, 2])).toThrow(/rounds differ/);
  });

  it("print the spread of the rounds beside the figure, and nothing for one measurement", () => {
    const f = (v: number) => v.toFixed(3);
    expect(spreadOf([0.842, 0.781, 0.8], f)).toBe(" (rounds 0.781–0.842 of 3)");
    expect(spreadOf([0.8], f)).toBe("");
    expect(spreadOf(undefined, f)).toBe("");
  });

  it("keep the spread in the report as the lowest and highest round, none for one measurement", () => {
    expect(spreadRange([0.842, 0.781, 0.8])).toEqual({ min: 0.781, max: 0.842, rounds: 3 });
    expect(spreadRange([0.8])).toBeUndefined();
    expect(spreadRange(undefined)).toBeUndefined();
  });
});
