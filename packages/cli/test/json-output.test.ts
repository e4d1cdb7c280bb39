import {
  type Client,
  create,
  type DescMessage,
  ExplainRecordResponseSchema,
  fromJsonString,
  GetRunResponseSchema,
  ListNotesResponseSchema,
  ListRunsResponseSchema,
  type MessageShape,
  ResumeRunResponseSchema,
  RetryRunResponseSchema,
  RunSchema,
  type RunService,
  RunStatus,
  StartRunResponseSchema,
  StopRunResponseSchema,
  timestampFromDate,
  VerifyRunResponseSchema,
  WatchRunResponseSchema,
} from "@drover/proto";
import { describe, expect, it } from "vitest";
import { type Io, runCommand } from "../src/commands.js";

const at = timestampFromDate(new Date("2026-12-01T10:20:30.123Z"));
const run = create(RunSchema, {
  id: "3f1e2d4c-5b6a-4789-8abc-def012345678",
  tenantId: "acme",
  source: "crm",
  sourceAccount: "acme-co",
  status: RunStatus.SUCCEEDED,
  phases: [{ kinds: ["organizations"] }],
  currentPhase: 1,
  progress: [{ kind: "organizations", imported: 9_007_199_254_740_993n, failed: 1n, tasksTotal: 2n }],
  tasks: { succeeded: 2n },
  createdAt: at,
  budget: { burstCapacity: 80, dailyKnown: true, dailyRemaining: 1000n, spent: 40n, dailyResetAt: at },
});

/** What each RPC answers: every int64 and timestamp kind the API has, so a BigInt or a Date would show. */
const responses = {
  startRun: create(StartRunResponseSchema, { run }),
  stopRun: create(StopRunResponseSchema, { run: { ...run, status: RunStatus.STOPPING } }),
  resumeRun: create(ResumeRunResponseSchema, { run: { ...run, status: RunStatus.RUNNING } }),
  retryRun: create(RetryRunResponseSchema, { run: { ...run, status: RunStatus.RUNNING } }),
  getRun: create(GetRunResponseSchema, { run }),
  listRuns: create(ListRunsResponseSchema, { runs: [run, run], nextPageToken: "next" }),
  listNotes: create(ListNotesResponseSchema, {
    groups: [{ level: "error", kind: "persons", reason: "bad email", count: 12n, sampleSubjectIds: ["7"] }],
  }),
  explainRecord: create(ExplainRecordResponseSchema, {
    found: true,
    entry: { kind: "persons", sourceId: "7", action: "created", recordId: "42", recordedAt: at },
    notes: [{ level: "warn", kind: "persons", subjectId: "7", reason: "r", runId: run.id, createdAt: at }],
    explanation: "persons 7 was created",
  }),
  verifyRun: create(VerifyRunResponseSchema, {
    verification: {
      ok: true,
      verifiedAt: at,
      kinds: [{ kind: "persons", sourceCount: 10n, ledgerCount: 9n, failedCount: 1n, sampled: 5n }],
    },
  }),
  watchRun: [
    create(WatchRunResponseSchema, { run: { ...run, status: RunStatus.RUNNING } }),
    create(WatchRunResponseSchema, { run }),
  ],
};

const client = {
  startRun: async () => responses.startRun,
  stopRun: async () => responses.stopRun,
  resumeRun: async () => responses.resumeRun,
  retryRun: async () => responses.retryRun,
  getRun: async () => responses.getRun,
  listRuns: async () => responses.listRuns,
  listNotes: async () => responses.listNotes,
  explainRecord: async () => responses.explainRecord,
  verifyRun: async () => responses.verifyRun,
  async *watchRun() {
    yield* responses.watchRun;
  },
} as unknown as Client<typeof RunService>;

async function jsonOf(...argv: string[]): Promise<string[]> {
  const out: string[] = [];
  const io: Io = { out: (t) => out.push(t), err: (t) => out.push(t), isTty: false };
  const [command, ...rest] = argv;
  await runCommand(command!, [...rest, "--json"], client, io, { DROVER_SOURCE_TOKEN: "t" });
  return out;
}

function expectSameMessage<Desc extends DescMessage>(text: string, schema: Desc, want: MessageShape<Desc>) {
  expect(fromJsonString(schema, text)).toEqual(want);
}

const id = run.id;

describe("drover --json", () => {
  it("prints each command's response as canonical protobuf JSON that reads back as the same message", async () => {
    const cases: [string[], DescMessage, unknown][] = [
      [
        ["start", "--tenant", "acme", "--account", "acme-co", "--base-url", "https://acme.pipedrive.com"],
        StartRunResponseSchema,
        responses.startRun,
      ],
      [["stop", id], StopRunResponseSchema, responses.stopRun],
      [["resume", id], ResumeRunResponseSchema, responses.resumeRun],
      [["retry", id], RetryRunResponseSchema, responses.retryRun],
      [["status", id], GetRunResponseSchema, responses.getRun],
      [["runs"], ListRunsResponseSchema, responses.listRuns],
      [["notes", id], ListNotesResponseSchema, responses.listNotes],
      [
        ["explain", "--tenant", "acme", "--account", "a", "--kind", "persons", "7"],
        ExplainRecordResponseSchema,
        responses.explainRecord,
      ],
      [["verify", id], VerifyRunResponseSchema, responses.verifyRun],
    ];
    for (const [argv, schema, want] of cases) {
      const out = await jsonOf(...argv);
      expect(out, argv[0]).toHaveLength(1);
      expectSameMessage(out[0]!, schema, want as MessageShape<DescMessage>);
    }
  });

  it("writes int64 as strings, timestamps in RFC 3339, enums by name, and zero counts as fields", async () => {
    const [status] = await jsonOf("status", id);
    const parsed = JSON.parse(status!) as {
      run: Record<string, unknown> & { progress: Record<string, unknown>[] };
    };
    expect(parsed.run.status).toBe("RUN_STATUS_SUCCEEDED");
    expect(parsed.run.createdAt).toBe("2026-12-01T10:20:30.123Z");
    expect(parsed.run.progress[0]).toMatchObject({
      kind: "organizations",
      imported: "9007199254740993",
      skipped: "0",
      failed: "1",
    });
  });

  it("verify --json prints the verification instead of failing on its int64 counts", async () => {
    const [out] = await jsonOf("verify", id);
    expect(JSON.parse(out!)).toMatchObject({
      verification: {
        ok: true,
        verifiedAt: "2026-12-01T10:20:30.123Z",
        kinds: [{ sourceCount: "10", sampled: "5" }],
      },
    });
  });

  it("watch --json prints one response per line as the run changes", async () => {
    const lines = await jsonOf("watch", id);
    expect(lines).toHaveLength(2);
    lines.forEach((line, i) => {
      expect(line).not.toContain("\n");
      expectSameMessage(line, WatchRunResponseSchema, responses.watchRun[i]!);
    });
  });
});
