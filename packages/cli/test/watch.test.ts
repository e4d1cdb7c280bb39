import {
  type Client,
  create,
  type MessageInitShape,
  RunSchema,
  type RunService,
  RunStatus,
  timestampFromDate,
  WatchRunResponseSchema,
} from "@drover/proto";
import { describe, expect, it } from "vitest";
import { type Io, runCommand } from "../src/commands.js";
import { visibleLength } from "../src/render.js";

const base: MessageInitShape<typeof RunSchema> = {
  id: "3f1e2d4c-5b6a-4789-8abc-def012345678",
  tenantId: "a-tenant-with-a-rather-long-name",
  source: "crm",
  sourceAccount: "an-account-whose-name-goes-on-and-on",
  status: RunStatus.RUNNING,
  phases: [{ kinds: ["organizations", "persons"] }],
  currentPhase: 0,
  progress: [
    { kind: "organizations", imported: 10n, tasksTotal: 2n, tasksDone: 1n, tasksRunning: 1n },
    { kind: "persons", imported: 7n, matched: 2n, alreadyHere: 1n, tasksTotal: 3n, tasksDone: 1n },
  ],
  tasks: { pending: 2n, running: 1n, succeeded: 2n },
};

/** A RunService whose WatchRun plays the given states: the watch's screen is what is under test. */
function playing(states: MessageInitShape<typeof RunSchema>[]): Client<typeof RunService> {
  return {
    watchRun: () => ({
      async *[Symbol.asyncIterator]() {
        for (const s of states) yield create(WatchRunResponseSchema, { run: create(RunSchema, s) });
      },
    }),
  } as unknown as Client<typeof RunService>;
}

async function watch(states: MessageInitShape<typeof RunSchema>[], columns: number) {
  const frames: string[] = [];
  const io: Io = { out: (t) => frames.push(t), err: () => {}, isTty: true, columns };
  const code = await runCommand("watch", [base.id!], playing(states), io, {});
  return { code, frames };
}

describe("drover watch on a terminal", () => {
  it("fits every line to the terminal's width and goes up exactly over the last frame", async () => {
    const states = [
      base,
      { ...base, progress: [{ ...base.progress![0]!, imported: 20n }, base.progress![1]!] },
      { ...base, status: RunStatus.SUCCEEDED, currentPhase: 1 },
    ];
    for (const columns of [200, 80, 50]) {
      const { code, frames } = await watch(states, columns);
      expect(code).toBe(0);
      const live = frames.slice(0, states.length);
      for (const [i, frame] of live.entries()) {
        // biome-ignore lint/suspicious/noControlCharactersInRegex: the terminal's escape sequences are under test
        const up = /^\x1b\[(\d+)A\r\x1b\[J/.exec(frame);
        if (i === 0) expect(up).toBeNull();
        // Each line of the previous frame took one row, since none was wider than the terminal.
        else expect(Number(up![1])).toBe(live[i - 1]!.split("\n").length);
        for (const line of frame.split("\n")) expect(visibleLength(line)).toBeLessThanOrEqual(columns);
      }
    }
  });

  it("says while the source account is walled off that the run waits for its budget, and until when", async () => {
    const walled = {
      ...base,
      sourceAccount: "acme-co",
      budget: {
        burstCapacity: 80,
        spent: 1n,
        blockedUntil: timestampFromDate(new Date(Date.now() + 3 * 3600_000)),
      },
    };
    const { frames } = await watch([walled, { ...walled, status: RunStatus.SUCCEEDED }], 200);
    expect(frames[0]).toMatch(
      /\nwaiting for the source's budget \(acme-co\) until (\d{4}-\d\d-\d\d )?\d\d:\d\d \(in (2 h 59 m|3 h)\)\n/,
    );
    // The run is over: nothing waits any more.
    expect(frames[1]).not.toContain("waiting for");
  });

  it("exits 3 for a stopped run and 1 for a failed one", async () => {
    expect((await watch([base, { ...base, status: RunStatus.STOPPED }], 80)).code).toBe(3);
    expect((await watch([base, { ...base, status: RunStatus.FAILED }], 80)).code).toBe(1);
  });
});
