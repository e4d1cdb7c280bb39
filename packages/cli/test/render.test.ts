import { Code, create, RpcError, RunSchema, RunStatus } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { describeFailure, UsageError } from "../src/commands.js";
import { countsTable, formatDuration, KindClock, progressBlock, runSummary } from "../src/render.js";

const run = create(RunSchema, {
  id: "3f1e2d4c-5b6a-4789-8abc-def012345678",
  tenantId: "acme",
  source: "crm",
  sourceAccount: "acme-co",
  status: RunStatus.RUNNING,
  phases: [{ kinds: ["organizations", "persons"] }, { kinds: ["deals"] }],
  currentPhase: 1,
  progress: [
    { kind: "organizations", imported: 10n, failed: 1n, tasksTotal: 2n, tasksDone: 2n },
    { kind: "persons", imported: 7n, matched: 2n, alreadyHere: 1n, tasksTotal: 3n, tasksDone: 3n },
    { kind: "deals", imported: 3n, tasksTotal: 4n, tasksDone: 1n, tasksRunning: 1n },
  ],
  tasks: { pending: 2n, running: 1n, succeeded: 6n },
});

describe("cli rendering", () => {
  it("shows already-here as matched plus ledger hits, per kind", () => {
    expect(countsTable(run)).toBe(
      [
        "kind           imported  already here  skipped  failed",
        "─────────────  ────────  ────────────  ───────  ──────",
        "organizations        10             0        0       1",
        "persons               7             3        0       0",
        "deals                 3             0        0       0",
      ].join("\n"),
    );
  });

  it("summarises a run with its phase and tasks", () => {
    expect(runSummary(run)).toContain(
      "phase 2/2 [deals]  tasks: 1 running, 2 pending, 6 done, 0 failed, 0 cancelled",
    );
  });

  it("says what the run learned about its source, strings unquoted, and nothing when it learned nothing", () => {
    const learned = create(RunSchema, {
      ...run,
      facts: { "pg-table.copy": '"in-database"', "crm.mail.bodies": '{"list":true}' },
    });
    expect(runSummary(learned)).toContain(
      'learned: crm.mail.bodies {"list":true}; pg-table.copy in-database',
    );
    expect(runSummary(run)).not.toContain("learned:");
  });

  it("gives rows/s and an ETA while the run goes", () => {
    const [header, ...rows] = progressBlock(run, 10_000);
    expect(header).toBe("running · phase 2/2 [deals] · 24 rows · 2 rows/s · ETA ~5s");
    expect(rows[0]).toContain("done");
    expect(rows[2]).toContain("ETA");
  });

  it("draws a bar per kind from its tasks, with its own rows/s and ETA", () => {
    let now = 0;
    const clock = new KindClock(() => now);
    progressBlock(run, 1_000, clock); // the watch first sees deals going
    now = 3_000;
    const deals = progressBlock(run, 3_000, clock)[3]!;
    // 1 of 4 tasks done in 3 s: 9 s for the 3 left; 3 rows in 3 s.
    expect(deals).toMatch(/^ {2}deals +█{5}░{15} +1\/4 +tasks +3 rows +1 rows\/s +ETA ~9s/);
    expect(deals).toContain("imported 3, already here 0, skipped 0, failed 0");
    const organizations = progressBlock(run, 3_000, clock)[1]!;
    expect(organizations).toMatch(/█{20} +2\/2 +tasks +11 rows .* done/);
  });

  it("shows a kind of a later phase as waiting, with an empty bar", () => {
    const early = create(RunSchema, { ...run, currentPhase: 0 });
    const deals = progressBlock(early, 3_000)[3]!;
    expect(deals).toMatch(/░{20}.*waiting/);
  });

  it("formats durations for people", () => {
    expect([formatDuration(42), formatDuration(125), formatDuration(7_300)]).toEqual([
      "42s",
      "2m05s",
      "2h01m",
    ]);
  });

  it("turns server errors into sentences with meaningful exit codes", () => {
    expect(describeFailure(new RpcError(Code.NOT_FOUND, "run x does not exist"))).toEqual({
      message: "run x does not exist",
      code: 4,
    });
    expect(describeFailure(new RpcError(Code.UNAUTHENTICATED, "no credentials")).code).toBe(77);
    expect(describeFailure(new RpcError(Code.FAILED_PRECONDITION, "run is succeeded")).code).toBe(5);
    expect(describeFailure(new UsageError("--tenant is required")).message).toMatch(
      /^--tenant is required\n\nusage: drover/,
    );
  });
});
