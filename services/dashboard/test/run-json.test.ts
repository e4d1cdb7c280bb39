import {
  Code,
  create,
  type MessageInitShape,
  RpcError,
  RunSchema,
  RunStatus,
  timestampFromDate,
} from "@drover/proto";
import { describe, expect, it } from "vitest";
import { loadDashboardConfig } from "../src/config.js";
import { problemFor, sentence } from "../src/http-errors.js";
import { budgetFacts, runJson } from "../src/run-json.js";

describe("the run as the page draws it", () => {
  // A message init: create() takes a spread message as it is, leaving nested inits bare.
  const init: MessageInitShape<typeof RunSchema> = {
    id: "3f1e2d4c-5b6a-4789-8abc-def012345678",
    tenantId: "acme",
    source: "crm",
    sourceAccount: "acme-co",
    status: RunStatus.FAILED,
    phases: [{ kinds: ["organizations"] }, { kinds: ["persons", "deals"] }],
    currentPhase: 1,
    progress: [
      {
        kind: "organizations",
        imported: 10n,
        matched: 2n,
        alreadyHere: 3n,
        skipped: 1n,
        failed: 4n,
        tasksTotal: 2n,
        tasksDone: 2n,
      },
      { kind: "persons", imported: 5n, tasksTotal: 3n, tasksDone: 1n, tasksRunning: 1n },
    ],
    tasks: { pending: 1n, running: 1n, succeeded: 3n, failed: 1n },
    budget: { burstCapacity: 80, burstUsed: 12, dailyKnown: false, spent: 400n },
    createdAt: timestampFromDate(new Date("2026-11-30T10:00:00Z")),
  };
  const run = create(RunSchema, init);

  it("keeps matched (a product record reused) apart from already here (an earlier run's), and totals the rows", () => {
    const json = runJson(run);
    expect(json.progress[0]).toEqual({
      kind: "organizations",
      imported: 10,
      matched: 2,
      alreadyHere: 3,
      skipped: 1,
      failed: 4,
      tasksTotal: 2,
      tasksDone: 2,
      tasksRunning: 0,
    });
    expect(json.rows).toBe(25);
    expect(json.status).toBe("failed");
    expect(json.phases).toEqual([["organizations"], ["persons", "deals"]]);
    expect(json.createdAt).toBe("2026-11-30T10:00:00.000Z");
  });

  it("lists the run's facts by key, a string without its quotes, anything else as JSON, a non-JSON value as it came", () => {
    const learned = create(RunSchema, {
      ...init,
      facts: { "pg-table.copy": '"streamed"', "crm.mail.bodies": "[1,2]", odd: "not json" },
    });
    expect(runJson(learned).facts).toEqual([
      { key: "crm.mail.bodies", value: "[1,2]" },
      { key: "odd", value: "not json" },
      { key: "pg-table.copy", value: "streamed" },
    ]);
    expect(runJson(run).facts).toEqual([]);
  });

  it("says an unreported daily allowance is unknown, not zero", () => {
    expect(runJson(run).budget).toMatchObject({
      burstCapacity: 80,
      burstUsed: 12,
      dailyRemaining: null,
      spent: 400,
    });
  });

  it("labels what the budget counts, and lists only what applies to the run as it is", () => {
    // A finished run: no burst window, no wall, no unreported allowance; what was spent, with its unit and period.
    expect(budgetFacts(run)).toEqual([
      {
        label: "spent on this account",
        text: "400 token units (the source's measure of requests), by every run on crm:acme-co since Drover first read it",
      },
    ]);
    const live = create(RunSchema, {
      ...init,
      status: RunStatus.RUNNING,
      budget: {
        burstCapacity: 80,
        burstUsed: 12,
        dailyKnown: true,
        dailyRemaining: 315_868n,
        dailyResetAt: timestampFromDate(new Date("2026-12-01T00:00:00Z")),
        blockedUntil: timestampFromDate(new Date("2026-11-30T10:05:00Z")),
        spent: 400n,
      },
    });
    expect(budgetFacts(live).map((f) => [f.label, f.text, f.at])).toEqual([
      ["burst window", "12 of 80 requests in use", undefined],
      ["walled off", "no request to the source until", "2026-11-30T10:05:00.000Z"],
      ["daily allowance left", "315,868 token units, renewed", "2026-12-01T00:00:00.000Z"],
      ["spent on this account", expect.stringMatching(/^400 token units/), undefined],
    ]);
  });

  it("says while the source account is walled off that the run waits for its budget, and until when", () => {
    const now = Date.parse("2026-11-30T10:00:00Z");
    const blockedUntil = timestampFromDate(new Date(now + (3 * 3600 + 12 * 60) * 1000));
    const walled = create(RunSchema, {
      ...init,
      status: RunStatus.RUNNING,
      budget: { burstCapacity: 80, dailyKnown: true, dailyRemaining: 0n, blockedUntil, spent: 400n },
    });
    expect(runJson(walled, now).budgetWait).toEqual({
      text: "waiting for the source's budget (acme-co) until",
      until: "2026-11-30T13:12:00.000Z",
    });
    // The wall is behind, or the run no longer goes: nothing waits.
    expect(runJson(walled, now + 4 * 3600_000).budgetWait).toBeNull();
    expect(runJson(create(RunSchema, { ...walled, status: RunStatus.FAILED }), now).budgetWait).toBeNull();
    expect(runJson(run, now).budgetWait).toBeNull();
  });

  it("carries GetRun's budget-aware ETA while the run goes", () => {
    const going = create(RunSchema, {
      ...init,
      status: RunStatus.RUNNING,
      eta: {
        seconds: 191_000n,
        text: "about 2 days 5 hours",
        requestsLeft: 91_200n,
        tokensLeft: 182_400n,
        dailyResets: 2,
      },
    });
    expect(runJson(going).eta).toEqual({
      text: "about 2 days 5 hours",
      seconds: 191_000,
      requests: 91_200,
      tokens: 182_400,
      dailyResets: 2,
    });
    expect(runJson(run).eta).toBeNull();
  });

  it("says while the account's day is spent that the run waits for the daily budget, in the account's time zone", () => {
    const now = Date.parse("2026-11-30T19:48:00Z");
    const reset = timestampFromDate(new Date("2026-11-30T23:00:00Z"));
    const spent = create(RunSchema, {
      ...init,
      status: RunStatus.RUNNING,
      budget: {
        burstCapacity: 80,
        dailyKnown: true,
        dailyRemaining: 0n,
        dailyResetAt: reset,
        blockedUntil: reset,
        dailySpent: true,
        dailyResetTimeZone: "Europe/Berlin",
        spent: 400n,
      },
    });
    expect(runJson(spent, now).budgetWait).toEqual({
      text: "waiting for the daily budget of acme-co until",
      until: "2026-11-30T23:00:00.000Z",
      timeZone: "Europe/Berlin",
    });
    expect(runJson(spent, Date.parse("2026-11-30T23:00:01Z")).budgetWait).toBeNull();
  });

  it("carries the finished run's verification, and says when it is still to come", () => {
    expect(runJson(run)).toMatchObject({ verification: null, verificationPending: true });
    expect(runJson(create(RunSchema, { ...init, status: RunStatus.RUNNING })).verificationPending).toBe(
      false,
    );
    const verified = runJson(
      create(RunSchema, {
        ...init,
        verification: {
          ok: false,
          verifiedAt: timestampFromDate(new Date("2026-11-30T11:00:00Z")),
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
      }),
    );
    expect(verified.verificationPending).toBe(false);
    expect(verified.verification).toEqual({
      ok: false,
      error: "",
      verifiedAt: "2026-11-30T11:00:00.000Z",
      kinds: [
        {
          kind: "persons",
          sourceCount: 10,
          ledgerCount: 9,
          failedCount: 0,
          sampled: 5,
          mismatches: ["persons 4: missing"],
        },
      ],
    });
  });

  it("carries a dry run's report in plain numbers, matches by rule and by ledger row, and awaits no verification", () => {
    const dry = runJson(
      create(RunSchema, {
        ...init,
        status: RunStatus.SUCCEEDED,
        dryRun: true,
        dryRunReport: {
          kinds: [
            {
              kind: "persons",
              wouldCreate: 110n,
              wouldMatch: 10n,
              matchedBy: { email: 8n },
              alreadyHere: 2n,
              wouldSkip: 1n,
              missingParents: { organizations: 1n },
              reasons: [{ level: "warn", kind: "persons", reason: "r", count: 1n, sampleSubjectIds: ["4"] }],
              requests: 6n,
              tokens: 120n,
            },
          ],
          requests: 6n,
          tokens: 120n,
          durationText: "about 4 minutes",
        },
      }),
    );
    expect(dry.isDryRun).toBe(true);
    expect(dry.verificationPending).toBe(false);
    expect(dry.dryRun).toEqual({
      kinds: [
        {
          kind: "persons",
          wouldCreate: 110,
          wouldMatch: 10,
          matchedBy: [
            { rule: "email", count: 8 },
            { rule: "ledger", count: 2 },
          ],
          wouldSkip: 1,
          missingParents: [{ parent: "organizations", count: 1 }],
          wouldFail: 0,
          reasons: [{ level: "warn", kind: "persons", reason: "r", count: 1, samples: ["4"] }],
          requests: 6,
          tokens: 120,
        },
      ],
      requests: 6,
      tokens: 120,
      durationText: "about 4 minutes",
      dailyResets: 0,
    });
    expect(runJson(run)).toMatchObject({ isDryRun: false, dryRun: null });
  });

  it("offers only the steering the status allows", () => {
    expect(runJson(run).can).toEqual({
      stop: false,
      resume: false,
      retry: true,
      redrive: true,
      revert: true,
    });
    expect(runJson(create(RunSchema, { ...init, status: RunStatus.RUNNING })).can).toEqual({
      stop: true,
      resume: false,
      retry: false,
      redrive: false,
      revert: false,
    });
    expect(runJson(create(RunSchema, { ...init, status: RunStatus.SUCCEEDED })).can.redrive).toBe(true);
    expect(runJson(create(RunSchema, { ...init, status: RunStatus.STOPPED })).can).toMatchObject({
      resume: true,
      revert: true,
    });
  });

  it("offers no revert of a revert run, of a reverted run or of a dry run, and shows what a revert removed per kind", () => {
    const finished = { ...init, status: RunStatus.SUCCEEDED };
    const reverting = runJson(
      create(RunSchema, {
        ...finished,
        revert: {
          reverts: "11111111-1111-4111-8111-111111111111",
          removed: 5n,
          kept: 1n,
          kinds: [{ kind: "persons", removed: 5n, gone: 2n, kept: 1n, total: 8n }],
        },
      }),
    );
    expect(reverting.can).toMatchObject({ revert: false, redrive: false });
    expect(reverting.verificationPending).toBe(false);
    expect(reverting.revert).toEqual({
      reverts: "11111111-1111-4111-8111-111111111111",
      revertedBy: null,
      force: false,
      removed: 5,
      kept: 1,
      kinds: [{ kind: "persons", removed: 5, gone: 2, kept: 1, total: 8 }],
    });
    const reverted = runJson(create(RunSchema, { ...finished, revert: { revertedBy: "2" } }));
    expect(reverted.can.revert).toBe(false);
    expect(reverted.revert).toMatchObject({ reverts: null, revertedBy: "2" });
    expect(runJson(create(RunSchema, { ...finished, dryRun: true })).can.revert).toBe(false);
    expect(runJson(create(RunSchema, finished)).revert).toBeNull();
  });
});

describe("the coordinator's refusals as sentences", () => {
  it("maps each status to an HTTP status and a sentence a person can act on", () => {
    expect(problemFor(new RpcError(Code.UNAUTHENTICATED, "unknown token"), "c:1")).toEqual({
      status: 401,
      message: "The coordinator does not accept this API key. Enter a valid key.",
    });
    expect(problemFor(new RpcError(Code.NOT_FOUND, "run x does not exist"), "c:1")).toEqual({
      status: 404,
      message: "Run x does not exist.",
    });
    expect(
      problemFor(
        new RpcError(Code.FAILED_PRECONDITION, "run x is succeeded; only a failed run can be retried"),
        "c:1",
      ).status,
    ).toBe(409);
    expect(
      problemFor(new RpcError(Code.UNAVAILABLE, "No connection established"), "10.0.0.1:50051").message,
    ).toBe(
      "The coordinator at 10.0.0.1:50051 cannot be reached right now (No connection established). Is it running?",
    );
    // The coordinator answered UNAVAILABLE itself: not a question of reaching it.
    expect(
      problemFor(
        new RpcError(Code.UNAVAILABLE, "run x could not be verified now: fetch failed", {}, true),
        "c:1",
      ),
    ).toEqual({
      status: 503,
      message: "The coordinator cannot do that right now: run x could not be verified now: fetch failed.",
    });
  });

  it("ends a sentence once", () => {
    expect([sentence("done"), sentence("Done."), sentence("why?")]).toEqual(["Done.", "Done.", "Why?"]);
  });
});

describe("dashboard configuration", () => {
  it("has defaults that work on one machine", () => {
    expect(loadDashboardConfig({})).toMatchObject({
      address: "127.0.0.1:8080",
      coordinatorAddress: "127.0.0.1:50051",
      metrics: { port: 9466 },
    });
    expect(loadDashboardConfig({ DROVER_METRICS_PORT: "off" }).metrics.port).toBeNull();
  });

  it("names every bad variable and what to fix", () => {
    expect(() =>
      loadDashboardConfig({
        DROVER_DASHBOARD_ADDRESS: "8080",
        DROVER_METRICS_PORT: "many",
        DROVER_TLS_CA_FILE: "/nonexistent/ca.pem",
      }),
    ).toThrow(
      /DROVER_DASHBOARD_ADDRESS: must be host:port[\s\S]*DROVER_METRICS_PORT: must be a port number[\s\S]*DROVER_TLS_CA_FILE: cannot read/,
    );
  });
});
