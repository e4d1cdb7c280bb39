import { describeFailure, type Io, runCommand } from "@drover/cli";
import {
  ExplainRecordResponseSchema,
  fromJsonString,
  GetRunResponseSchema,
  ListNotesResponseSchema,
  ListRunsResponseSchema,
  RunStatus,
  StartRunResponseSchema,
  VerifyRunResponseSchema,
  WatchRunResponseSchema,
} from "@drover/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster } from "../support/in-process.js";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster({ workers: 1, sandbox: { malformedRate: 0.05 } });
});
afterAll(async () => {
  await cluster?.close();
});

/** Runs one `drover` command against the live coordinator and captures what it prints. */
async function drover(...argv: string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const io: Io = { out: (t) => lines.push(t), err: (t) => lines.push(t), isTty: false };
  const [command, ...rest] = argv;
  try {
    const code = await runCommand(command!, rest, cluster.client, io, {});
    return { code, out: lines.join("\n") };
  } catch (err) {
    const failure = describeFailure(err);
    return { code: failure.code, out: failure.message };
  }
}

describe("drover CLI", () => {
  it("starts a run, watches it to the end with exit 0, and shows counts, notes and one record's story", async () => {
    const started = await drover(
      "start",
      "--tenant",
      "cli-tenant",
      "--account",
      "sandbox",
      "--base-url",
      cluster.sandbox.url,
      "--api-token",
      "token-for-cli",
      "--setting",
      "pageSize=50",
      "--json",
    );
    expect(started.code).toBe(0);
    const runId = (JSON.parse(started.out) as { run: { id: string } }).run.id;

    const watched = await drover("watch", runId);
    expect(watched.code).toBe(0);
    expect(watched.out).toMatch(/rows\/s/);
    expect(watched.out).toMatch(/kind\s+imported\s+already here\s+skipped\s+failed/);

    const status = await drover("status", runId, "--json");
    expect(JSON.parse(status.out)).toMatchObject({ run: { id: runId, status: "RUN_STATUS_SUCCEEDED" } });

    const notes = await drover("notes", runId, "--level", "error");
    expect(notes.code).toBe(0);
    expect(notes.out).toMatch(/error/);

    const explained = await drover(
      "explain",
      "--tenant",
      "cli-tenant",
      "--account",
      "sandbox",
      "--kind",
      "organizations",
      "1",
    );
    expect(explained.out).toMatch(
      /organizations 1 was (created|matched)|organizations 1 never reached the ledger/,
    );

    const runs = await drover("runs", "--tenant", "cli-tenant");
    expect(runs.out).toContain(runId);
  });

  it("prints every command's --json as the response message, read back by the protobuf runtime", async () => {
    const started = await drover(
      "start",
      "--tenant",
      "cli-json",
      "--account",
      "sandbox-json",
      "--base-url",
      cluster.sandbox.url,
      "--api-token",
      "token-for-cli",
      "--kinds",
      "organizations",
      "--json",
    );
    const runId = fromJsonString(StartRunResponseSchema, started.out).run!.id;
    const watched = await drover("watch", runId, "--json");
    expect(watched.code).toBe(0);
    const updates = watched.out.split("\n").map((line) => fromJsonString(WatchRunResponseSchema, line));
    expect(updates.at(-1)!.run!.status).toBe(RunStatus.SUCCEEDED);

    const status = fromJsonString(GetRunResponseSchema, (await drover("status", runId, "--json")).out);
    expect(status.run!.progress.find((p) => p.kind === "organizations")!.imported).toBeGreaterThan(0n);
    const runs = fromJsonString(
      ListRunsResponseSchema,
      (await drover("runs", "--tenant", "cli-json", "--json")).out,
    );
    expect(runs.runs.map((r) => r.id)).toEqual([runId]);
    const notes = fromJsonString(ListNotesResponseSchema, (await drover("notes", runId, "--json")).out);
    expect(notes.groups.every((g) => g.count > 0n)).toBe(true);
    const explained = await drover(
      "explain",
      "--tenant",
      "cli-json",
      "--account",
      "sandbox-json",
      "--kind",
      "organizations",
      "1",
      "--json",
    );
    expect(fromJsonString(ExplainRecordResponseSchema, explained.out).explanation).toMatch(
      /^organizations 1 /,
    );
    // The whole verification, then its int64 counts: this once died on "Do not know how to serialize a BigInt".
    const verified = await drover("verify", runId, "--json");
    const verification = fromJsonString(VerifyRunResponseSchema, verified.out).verification!;
    expect(verification.kinds.map((k) => k.kind)).toContain("organizations");
    expect(JSON.parse(verified.out).verification.kinds[0].sourceCount).toMatch(/^\d+$/);
  });

  it("says what is wrong, as a sentence with a meaningful exit code", async () => {
    const missing = await drover("status", "00000000-0000-4000-8000-000000000000");
    expect(missing.code).toBe(4);
    expect(missing.out).toMatch(/does not exist/);
    const usage = await drover("start", "--account", "x", "--base-url", "http://x");
    expect(usage.code).toBe(2);
    expect(usage.out).toMatch(/--tenant is required/);
  });
});
