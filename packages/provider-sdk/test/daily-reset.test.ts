import { describe, expect, it } from "vitest";
import {
  nextResetAtPhase,
  nextResetCandidate,
  phaseOf,
  RESET_CANDIDATES_PER_DAY,
} from "../src/daily-reset.js";

const DAY = 86_400_000;
const HALF_HOUR = 1_800_000;

describe("where a day's reset can fall", () => {
  it("is the half hours of the day, strictly after the instant asked about, scaled with a shorter day", () => {
    const t = Date.UTC(2026, 11, 7, 13, 10);
    expect(nextResetCandidate(t, DAY)).toBe(Date.UTC(2026, 11, 7, 13, 30));
    expect(nextResetCandidate(Date.UTC(2026, 11, 7, 13, 30), DAY)).toBe(Date.UTC(2026, 11, 7, 14, 0));
    expect(nextResetCandidate(1_000_100, 30_000)).toBe(1_000_625);
    expect(RESET_CANDIDATES_PER_DAY * HALF_HOUR).toBe(DAY);
  });

  it("is, once learned, the same phase of every later day", () => {
    // Midnight in New York in winter is 05:00 UTC.
    const phase = phaseOf(Date.UTC(2026, 11, 7, 5, 0), DAY);
    expect(phase).toBe(5 * 3_600_000);
    expect(nextResetAtPhase(Date.UTC(2026, 11, 7, 4, 59), phase, DAY)).toBe(Date.UTC(2026, 11, 7, 5, 0));
    expect(nextResetAtPhase(Date.UTC(2026, 11, 7, 5, 0), phase, DAY)).toBe(Date.UTC(2026, 11, 8, 5, 0));
  });
});
