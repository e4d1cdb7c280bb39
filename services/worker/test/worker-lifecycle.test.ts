import { describe, expect, it } from "vitest";
import { WorkerLifecycle, type WorkerState } from "../src/worker-lifecycle.js";

describe("a worker's lifecycle", () => {
  it("goes from INITIALIZED through the staged stop to STOPPED, or to FAILED, and tells each move", () => {
    const moves: [WorkerState, WorkerState][] = [];
    const life = new WorkerLifecycle((from, to) => moves.push([from, to]));
    for (const s of ["RUNNING", "STOPPING", "DRAINING", "DRAINED", "STOPPED"] as const) life.moveTo(s);
    expect(moves.map(([, to]) => to)).toEqual(["RUNNING", "STOPPING", "DRAINING", "DRAINED", "STOPPED"]);

    const failing = new WorkerLifecycle();
    for (const s of ["RUNNING", "STOPPING", "DRAINING", "DRAINED", "FAILED"] as const) failing.moveTo(s);
    expect(failing.state).toBe("FAILED");
  });

  it("refuses a move that skips the drain or leaves an end state", () => {
    const life = new WorkerLifecycle();
    life.moveTo("RUNNING");
    expect(() => life.moveTo("STOPPED")).toThrow("a worker cannot go from RUNNING to STOPPED");
    for (const s of ["STOPPING", "DRAINING", "DRAINED", "STOPPED"] as const) life.moveTo(s);
    expect(() => life.moveTo("RUNNING")).toThrow("a worker cannot go from STOPPED to RUNNING");
  });
});
