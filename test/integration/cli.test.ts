import { describeFailure, type Io, runCommand } from "@drover/cli";
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
    const runId = (JSON.parse(started.out) as { id: string }).id;

    const watched = await drover("watch", runId);
    expect(watched.code).toBe(0);
    expect(watched.out).toMatch(/rows\/s/);
    expect(watched.out).toMatch(/kind\s+imported\s+already here\s+skipped\s+failed/);

    const status = await drover("status", runId, "--json");
    expect(JSON.parse(status.out)).toMatchObject({ id: runId, status: "RUN_STATUS_SUCCEEDED" });

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

  it("says what is wrong, as a sentence with a meaningful exit code", async () => {
    const missing = await drover("status", "00000000-0000-4000-8000-000000000000");
    expect(missing.code).toBe(4);
    expect(missing.out).toMatch(/does not exist/);
    const usage = await drover("start", "--account", "x", "--base-url", "http://x");
    expect(usage.code).toBe(2);
    expect(usage.out).toMatch(/--tenant is required/);
  });
});
