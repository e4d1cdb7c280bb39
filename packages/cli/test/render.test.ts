import {
  Code,
  create,
  type MessageInitShape,
  RpcError,
  RunEtaSchema,
  RunSchema,
  RunStatus,
  timestampFromDate,
} from "@drover/proto";
import { describe, expect, it } from "vitest";
import { describeFailure, EXIT, UsageError } from "../src/commands.js";
import {
  budgetWaitLine,
  COUNTS_LEGEND,
  countsTable,
  formatDuration,
  formatWait,
  KindClock,
  progressBlock,
  runSummary,
  table,
  visibleLength,
} from "../src/render.js";

// A message init, not a message: create() takes a spread message as it is, leaving nested inits bare.
const base: MessageInitShape<typeof RunSchema> = {
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
};
const run = create(RunSchema, base);

describe("cli rendering", () => {
  it("shows matched (an existing product record reused) apart from already here (an earlier run imported it)", () => {
    expect(countsTable(run)).toBe(
      [
        "kind           imported  matched  already here  skipped  failed",
        "─────────────  ────────  ───────  ────────────  ───────  ──────",
        "organizations        10        0             0        0       1",
        "persons               7        2             1        0       0",
        "deals                 3        0             0        0       0",
      ].join("\n"),
    );
    expect(COUNTS_LEGEND.join("\n")).toMatch(
      /matched: the product already had[\s\S]*already here: an earlier run/,
    );
  });

  it("left-aligns text columns and right-aligns counts", () => {
    expect(
      table(
        ["run", "status", "rows"],
        [
          ["r-1", "succeeded", "12"],
          ["r-22", "failed", "7"],
        ],
      ),
    ).toBe(
      [
        "run   status     rows",
        "────  ─────────  ────",
        "r-1   succeeded    12",
        "r-22  failed        7",
      ].join("\n"),
    );
  });

  it("fits a table to the terminal by cutting its widest text column, never a count", () => {
    const reason = "the person's organization is not in the ledger (it failed or was not imported)";
    const wide = table(
      ["count", "level", "kind", "reason", "e.g. source ids"],
      [["1234", "error", "persons", reason, "17, 18, 19, 20, 21"]],
      { width: 60 },
    );
    const lines = wide.split("\n");
    expect(lines.every((l) => visibleLength(l) <= 60)).toBe(true);
    expect(lines[2]).toMatch(/^ 1234 {2}error {2}persons {2}the person's org… {2}17, 18, 19, 20, 21$/);
    // Nothing is cut without a width (a pipe or a file).
    expect(table(["reason"], [[reason]])).toContain(reason);
  });

  it("summarises a run with its phase and tasks", () => {
    expect(runSummary(run)).toContain(
      "phase 2/2 [deals]  tasks: 1 running, 2 pending, 6 done, 0 failed, 0 cancelled",
    );
  });

  it("prints a dry run's report: what a real run would do per kind, why rows would skip or fail, and its cost", () => {
    const dry = create(RunSchema, {
      ...base,
      dryRun: true,
      dryRunReport: {
        kinds: [
          {
            kind: "persons",
            wouldCreate: 110n,
            wouldMatch: 10n,
            matchedBy: { email: 8n },
            alreadyHere: 2n,
            wouldFail: 3n,
            reasons: [
              {
                level: "error",
                kind: "persons",
                reason: "bad email",
                count: 3n,
                sampleSubjectIds: ["7", "9"],
              },
            ],
            missingParents: { organizations: 1n },
            requests: 6n,
            tokens: 120n,
          },
        ],
        requests: 1204n,
        tokens: 24080n,
        seconds: 11100n,
        durationText: "about 3 hours 5 minutes",
        dailyResets: 1,
      },
    });
    const text = runSummary(dry);
    expect(text).toMatch(/^dry run /);
    expect(text).toMatch(/persons +110 +10 +email 8, ledger 2 +0 +3 +6 +120/);
    expect(text).toContain("  persons would fail 3: bad email (e.g. 7, 9)");
    expect(text).toContain("  persons would skip for missing parents: organizations 1");
    expect(text).toContain(
      "a real run would cost 1,204 requests, 24,080 tokens: about 3 hours 5 minutes at the account's budget, 1 daily reset",
    );
    expect(runSummary(run)).not.toContain("dry run");
    expect(text).not.toContain("day(s) of a daily budget");
  });

  it("says in budget-days what a dry run's real run needs at the account's daily budget", () => {
    const dry = create(RunSchema, {
      ...base,
      dryRun: true,
      dryRunReport: {
        kinds: [],
        requests: 40_000n,
        tokens: 609_000n,
        seconds: 400_000n,
        durationText: "about 4 days 15 hours",
        dailyResets: 4,
        dailyTokens: 150_000n,
        budgetDays: 4.06,
      },
    });
    expect(runSummary(dry)).toContain(
      "that is 4.06 day(s) of a daily budget of 150,000 tokens, 5 calendar day(s) if nothing else spends it",
    );
  });

  it("says what the run learned about its source, strings unquoted, and nothing when it learned nothing", () => {
    const learned = create(RunSchema, {
      ...base,
      facts: { "pg-table.copy": '"in-database"', "crm.mail.bodies": '{"list":true}' },
    });
    expect(runSummary(learned)).toContain(
      'learned: crm.mail.bodies {"list":true}; pg-table.copy in-database',
    );
    expect(runSummary(run)).not.toContain("learned:");
  });

  it("shows a follow run's replication lag and the changes each pass applied", () => {
    const at = (iso: string) => timestampFromDate(new Date(iso));
    const following = create(RunSchema, {
      ...base,
      follow: {
        intervalSeconds: 300,
        replicationLagSeconds: 42n,
        passes: [
          {
            index: 0,
            since: at("2026-01-01T00:00:00Z"),
            startsAt: at("2026-01-01T01:00:00Z"),
            finishedAt: at("2026-01-01T01:00:05Z"),
            changes: 0n,
          },
          {
            index: 1,
            since: at("2026-01-01T01:00:00Z"),
            startsAt: at("2026-01-01T01:05:00Z"),
            finishedAt: at("2026-01-01T01:05:03Z"),
            changes: 17n,
            deletions: 4n,
          },
          { index: 2, since: at("2026-01-01T01:05:00Z"), startsAt: at("2026-01-01T01:10:00Z") },
        ],
      },
    });
    const text = runSummary(following);
    expect(text).toContain("follow: every 300s, until cutover (drover complete RUN_ID); replication lag 42s");
    expect(text).toContain(
      "  pass 1 (since 2026-01-01T01:00:00.000Z): 17 change(s), 4 of them deleted at the source",
    );
    expect(text).toMatch(/ {2}pass 2 \(since 2026-01-01T01:05:00.000Z\): running/);
    expect(runSummary(run)).not.toContain("follow:");
  });

  it("shows how a follow run learns of changes: webhooks with their reconcile, or polling and why", () => {
    const lastEventAt = timestampFromDate(new Date(Date.now() - 3_000));
    const hooked = create(RunSchema, {
      ...base,
      follow: { intervalSeconds: 300, feed: "webhooks", reconcileSeconds: 3600, lastEventAt },
    });
    expect(runSummary(hooked)).toMatch(/feed: webhooks, reconcile every 3600s; last event [34]s ago/);
    const polling = create(RunSchema, {
      ...base,
      follow: { intervalSeconds: 300, feed: "polling", feedReason: "no public URL is configured" },
    });
    expect(runSummary(polling)).toContain("feed: polling every 300s (no public URL is configured)");
    const before = create(RunSchema, { ...base, follow: { intervalSeconds: 300 } });
    expect(runSummary(before)).not.toContain("feed:");
  });

  it("shows a revert run by what it removed per kind, children first, and a reverted run by its revert", () => {
    const reverting = create(RunSchema, {
      ...base,
      revert: {
        reverts: "11111111-1111-4111-8111-111111111111",
        force: true,
        removed: 7n,
        kept: 1n,
        kinds: [
          { kind: "deals", removed: 5n, gone: 1n, kept: 1n, total: 10n },
          { kind: "persons", removed: 2n, gone: 0n, kept: 0n, total: 4n },
        ],
      },
    });
    const text = runSummary(reverting);
    expect(text).toContain(
      "revert of run 11111111-1111-4111-8111-111111111111 (forced): 7 records removed, 1 left in place",
    );
    expect(text).toMatch(/kind\s+removed\s+already gone\s+could not remove\s+created by the run/);
    expect(text).toMatch(/deals\s+5\s+1\s+1\s+10/);
    expect(text).not.toContain("imported");
    const [header, deals, persons] = progressBlock(reverting, 1_000);
    expect(header).toContain("revert of run 11111111-1111-4111-8111-111111111111 (forced) · 9/14 records");
    expect(deals).toContain("removed 5, already gone 1, could not remove 1 of 10");
    expect(persons).toContain("removed 2, already gone 0, could not remove 0 of 4");
    const reverted = create(RunSchema, {
      ...base,
      revert: { revertedBy: "22222222-2222-4222-8222-222222222222" },
    });
    expect(runSummary(reverted)).toContain("reverted by run 22222222-2222-4222-8222-222222222222");
  });

  it("gives rows/s and an ETA while the run goes", () => {
    const [header, ...rows] = progressBlock(run, 10_000);
    expect(header).toBe("running · phase 2/2 [deals] · 24 rows · 2 rows/s · ETA ~5s");
    expect(rows[0]).toContain("done");
    expect(rows[2]).toContain("ETA");
  });

  it("gives GetRun's budget-aware ETA, in status and in watch, while the run goes", () => {
    const eta = create(RunEtaSchema, {
      seconds: 191_000n,
      text: "about 2 days 5 hours",
      requestsLeft: 91_200n,
      tokensLeft: 182_400n,
      dailyResets: 2,
    });
    const going = create(RunSchema, { ...base, eta });
    expect(progressBlock(going, 10_000)[0]).toBe(
      "running · phase 2/2 [deals] · 24 rows · 2 rows/s · ETA about 2 days 5 hours",
    );
    expect(runSummary(going)).toContain(
      "ETA: about 2 days 5 hours (budget: 91,200 requests, 182,400 tokens, 2 daily resets)",
    );
    // A finished run has none to show.
    const done = create(RunSchema, { ...base, eta, status: RunStatus.SUCCEEDED });
    expect(runSummary(done)).not.toContain("ETA");
  });

  it("draws a bar per kind from its tasks, with its own rows/s and ETA", () => {
    let now = 0;
    const clock = new KindClock(() => now);
    progressBlock(run, 1_000, clock); // the watch first sees deals going
    now = 3_000;
    const deals = progressBlock(run, 3_000, clock)[3]!;
    // 1 of 4 tasks done in 3 s: 9 s for the 3 left; 3 rows in 3 s.
    expect(deals).toMatch(/^ {2}deals +█{5}░{15} +1\/4 +tasks +3 rows +1 rows\/s +ETA ~9s/);
    expect(deals).toContain("imported 3, matched 0, already here 0, skipped 0, failed 0");
    const organizations = progressBlock(run, 3_000, clock)[1]!;
    expect(organizations).toMatch(/█{20} +2\/2 +tasks +11 rows .* done/);
  });

  it("shows a kind of a later phase as waiting, with an empty bar", () => {
    const early = create(RunSchema, { ...base, currentPhase: 0 });
    const deals = progressBlock(early, 3_000)[3]!;
    expect(deals).toMatch(/░{20}.*waiting/);
  });

  it("keeps every line of the live view within the terminal's width, so a redraw covers it", () => {
    for (const width of [160, 100, 60, 30]) {
      const block = progressBlock(run, 3_000, new KindClock(), width);
      for (const line of block) expect(visibleLength(line)).toBeLessThanOrEqual(width);
      expect(block.join("\n")).toContain("deals");
    }
    // Wide enough: one line per kind, counts included.
    expect(progressBlock(run, 3_000, new KindClock(), 160)).toHaveLength(4);
    // Narrower: each kind's counts go on a line of their own, and columns give way.
    const narrow = progressBlock(run, 3_000, new KindClock(), 60);
    expect(narrow).toHaveLength(7);
    expect(narrow[4]).toMatch(/^ +imported 7, matched 2, already here 1/);
  });

  it("freezes a kind's rows/s once it is done, even while its phase goes on", () => {
    let now = 0;
    const clock = new KindClock(() => now);
    const going = create(RunSchema, {
      ...base,
      progress: [
        { kind: "deals", imported: 20n, tasksTotal: 4n, tasksDone: 4n },
        { kind: "leads", imported: 5n, tasksTotal: 4n, tasksDone: 1n, tasksRunning: 1n },
      ],
      phases: [{ kinds: ["deals", "leads"] }],
      currentPhase: 0,
    });
    const dealsMoving = create(RunSchema, {
      ...base,
      progress: [
        { kind: "deals", imported: 10n, tasksTotal: 4n, tasksDone: 2n, tasksRunning: 2n },
        { kind: "leads", imported: 1n, tasksTotal: 4n, tasksDone: 0n, tasksRunning: 1n },
      ],
      phases: [{ kinds: ["deals", "leads"] }],
      currentPhase: 0,
    });
    progressBlock(dealsMoving, 0, clock);
    now = 10_000;
    expect(progressBlock(going, 10_000, clock)[1]).toMatch(/20 rows +2 rows\/s +done/);
    now = 100_000;
    expect(progressBlock(going, 100_000, clock)[1]).toMatch(/20 rows +2 rows\/s +done/);
    // A watch begun after deals were done: their rate over the run's time until then, then frozen.
    const late = new KindClock(() => now);
    expect(progressBlock(going, 100_000, late)[1]).toMatch(/20 rows +0 rows\/s +done/);
    now = 400_000;
    expect(progressBlock(going, 400_000, late)[1]).toMatch(/20 rows +0 rows\/s +done/);
    expect(late.activeSeconds(going.progress[0]!, 400, true)).toBe(100);
  });

  it("shows the finished run's verification in status, and that it is still to come", () => {
    const finished = create(RunSchema, { ...base, status: RunStatus.SUCCEEDED });
    expect(runSummary(finished)).toContain("verification: not done yet (a worker does it shortly");
    const verified = create(RunSchema, {
      ...base,
      status: RunStatus.SUCCEEDED,
      verification: {
        ok: false,
        kinds: [
          {
            kind: "persons",
            sourceCount: 10n,
            ledgerCount: 9n,
            sampled: 5n,
            mismatches: ["persons 4: missing"],
          },
        ],
      },
    });
    const summary = runSummary(verified);
    expect(summary).toContain("verification: found problems");
    expect(summary).toMatch(/persons +10 +9 +0 +5 +1\n {2}persons: persons 4: missing/);
    expect(runSummary(run)).not.toContain("verification");
  });

  it("never promises a verification to a finished dry run or revert run, which are not verified", () => {
    const dry = create(RunSchema, { ...base, status: RunStatus.SUCCEEDED, dryRun: true });
    expect(runSummary(dry)).toContain("verification: none (a dry run writes nothing to verify)");
    const revert = create(RunSchema, {
      ...base,
      status: RunStatus.SUCCEEDED,
      revert: { reverts: "00000000-0000-4000-8000-000000000001" },
    });
    expect(runSummary(revert)).toContain("verification: none (a revert run is not verified)");
    expect(runSummary(revert)).not.toContain("not done yet");
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

  it("tells a coordinator that cannot be reached from one that answered it cannot do it now", () => {
    const unreachable = describeFailure(
      new RpcError(
        Code.UNAVAILABLE,
        "No connection established. Last error: connect ECONNREFUSED. Resolution note: .",
      ),
      "10.0.0.1:50051",
    );
    expect(unreachable).toEqual({
      message:
        "cannot reach the coordinator at 10.0.0.1:50051: No connection established. Last error: connect ECONNREFUSED. Is it running, and is DROVER_ADDRESS right?",
      code: EXIT.unreachable,
    });
    const sourceDown = describeFailure(
      new RpcError(Code.UNAVAILABLE, "run r could not be verified now: fetch failed", {}, true),
      "10.0.0.1:50051",
    );
    expect(sourceDown.code).toBe(EXIT.tryLater);
    expect(sourceDown.message).toBe(
      "the coordinator answered but cannot do that now: run r could not be verified now: fetch failed",
    );
  });
});

describe("a run whose source account is walled off", () => {
  const now = Date.parse("2026-12-01T09:00:00Z");
  const walled = create(RunSchema, {
    ...base,
    budget: {
      burstCapacity: 80,
      dailyKnown: true,
      dailyRemaining: 0n,
      blockedUntil: timestampFromDate(new Date(now + (3 * 3600 + 12 * 60) * 1000)),
      spent: 600_000n,
    },
  });
  // In the process's own time zone, which may put the wall on the next day.
  const sentence =
    /^waiting for the source's budget \(acme-co\) until (\d{4}-\d\d-\d\d )?\d\d:\d\d \(in 3 h 12 m\)$/;

  it("says what it waits for, until when in local time, and how long that is", () => {
    expect(budgetWaitLine(walled, now, "Europe/Berlin")).toBe(
      "waiting for the source's budget (acme-co) until 13:12 (in 3 h 12 m)",
    );
    // A wall on another day names the day.
    const tomorrow = create(RunSchema, {
      ...walled,
      budget: { ...walled.budget!, blockedUntil: timestampFromDate(new Date(now + 26 * 3600_000)) },
    });
    expect(budgetWaitLine(tomorrow, now, "UTC")).toBe(
      "waiting for the source's budget (acme-co) until 2026-12-02 11:00 (in 1 d 2 h)",
    );
  });

  it("says nothing once the wall is behind, or the run no longer goes", () => {
    expect(budgetWaitLine(walled, now + 4 * 3600_000)).toBeUndefined();
    expect(
      budgetWaitLine(create(RunSchema, { ...walled, status: RunStatus.SUCCEEDED }), now),
    ).toBeUndefined();
    expect(budgetWaitLine(run, now)).toBeUndefined();
  });

  it("is in drover status and in every frame of drover watch", () => {
    expect(runSummary(walled, { now }).split("\n")[2]).toMatch(sentence);
    expect(runSummary(run, { now })).not.toContain("waiting for");
    const frame = progressBlock(walled, 10_000, new KindClock(() => now));
    expect(frame[1]).toMatch(sentence);
    expect(
      progressBlock(walled, 10_000, new KindClock(() => now), 40).every((l) => visibleLength(l) <= 40),
    ).toBe(true);
  });

  it("says while the account's day is spent that it waits for the daily budget, until midnight in the account's time zone", () => {
    // 19:48 UTC is 20:48 in Berlin: the reset at Berlin's midnight is 3 h 12 m away.
    const evening = Date.parse("2026-12-01T19:48:00Z");
    const reset = Date.parse("2026-12-01T23:00:00Z");
    const spent = create(RunSchema, {
      ...base,
      budget: {
        burstCapacity: 80,
        dailyKnown: true,
        dailyRemaining: 0n,
        dailyResetAt: timestampFromDate(new Date(reset)),
        blockedUntil: timestampFromDate(new Date(reset)),
        dailySpent: true,
        dailyResetTimeZone: "Europe/Berlin",
        spent: 600_000n,
      },
    });
    const line = "waiting for the daily budget of acme-co until 00:00 Europe/Berlin (in 3 h 12 m)";
    expect(budgetWaitLine(spent, evening, "UTC")).toBe(line);
    expect(runSummary(spent, { now: evening }).split("\n")[2]).toBe(line);
    expect(progressBlock(spent, 10_000, new KindClock(() => evening))[1]).toBe(line);
    // A count that is merely low is not a spent day: the burst wall, if any, is said as before.
    const low = create(RunSchema, { ...spent, budget: { ...spent.budget!, dailySpent: false } });
    expect(budgetWaitLine(low, evening, "UTC")).toMatch(/^waiting for the source's budget/);
    expect(budgetWaitLine(spent, reset + 1)).toBeUndefined();
  });

  it("spells a wait as a person says it", () => {
    expect([45, 12 * 60, 3 * 3600, 3 * 3600 + 12 * 60 + 30, 2 * 86_400 + 5 * 3600].map(formatWait)).toEqual([
      "45 s",
      "12 m",
      "3 h",
      "3 h 12 m",
      "2 d 5 h",
    ]);
  });
});
