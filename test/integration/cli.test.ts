import { execFile } from "node:child_process";
import { join } from "node:path";
import { describeFailure, EXIT, type Io, runCommand } from "@drover/cli";
import { startSandbox } from "@drover/crm-sandbox";
import { REPO_ROOT } from "@drover/local-cluster";
import {
  ExplainRecordResponseSchema,
  fromJsonString,
  GetRunResponseSchema,
  ListAuditEventsResponseSchema,
  ListNotesResponseSchema,
  ListRunsResponseSchema,
  RunStatus,
  StartRunResponseSchema,
  VerifyRunResponseSchema,
  WatchRunResponseSchema,
} from "@drover/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, untilFinished } from "../support/in-process.js";

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
    expect(watched.out).toMatch(/kind\s+imported\s+matched\s+already here\s+skipped\s+failed/);

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
    const audit = fromJsonString(ListAuditEventsResponseSchema, (await drover("audit", runId, "--json")).out);
    expect(audit.events.map((e) => [e.action, e.outcome])).toEqual([["StartRun", "ok"]]);
    expect((await drover("audit", "--since", "yesterday")).code).toBe(EXIT.usage);
  });

  it("says what is wrong, as a sentence with a meaningful exit code", async () => {
    const missing = await drover("status", "00000000-0000-4000-8000-000000000000");
    expect(missing.code).toBe(4);
    expect(missing.out).toMatch(/does not exist/);
    const usage = await drover("start", "--account", "x", "--base-url", "http://x");
    expect(usage.code).toBe(2);
    expect(usage.out).toMatch(/--tenant is required/);
  });

  it("refuses to explain a kind the source does not have, naming the kinds it has", async () => {
    const widgets = await drover(
      "explain",
      "--tenant",
      "cli-tenant",
      "--account",
      "sandbox",
      "--kind",
      "widgets",
      "1",
    );
    expect(widgets.code).toBe(EXIT.usage);
    expect(widgets.out).toMatch(/unknown kind "widgets" for source crm; its kinds: organizations, persons, /);
  });

  it("says the coordinator answered when it is the source that is down, and exits 75, not 69", async () => {
    const gone = await startSandbox({
      organizations: 5,
      persons: 0,
      deals: 0,
      leads: 0,
      activities: 0,
      notes: 0,
    });
    const { run } = await cluster.client.startRun({
      tenantId: "cli-source-down",
      source: "crm",
      sourceAccount: "sandbox-gone",
      kinds: ["organizations"],
      sourceConfig: { baseUrl: gone.url, apiToken: "token-for-cli" },
    });
    await untilFinished(cluster, run!.id);
    await gone.close();
    const verified = await drover("verify", run!.id);
    expect(verified.out).not.toMatch(/cannot reach the coordinator/);
    expect(verified.out).toMatch(
      /^the coordinator answered but cannot do that now: run .* could not be verified now/,
    );
    expect(verified.code).toBe(EXIT.tryLater);
  });
});

/** The `drover` command a user runs (packages/cli's bin), as a process: its exit code is the CLI's own. */
function droverBin(args: string[], env: Record<string, string> = {}) {
  const bin = join(REPO_ROOT, "node_modules", ".bin", "drover");
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    execFile(bin, args, { env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") reject(err);
      else resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
  });
}

describe("the drover bin", () => {
  it("exits with the documented codes, not 1, and without a package manager's banner", async () => {
    const unreachable = await droverBin(["status", "00000000-0000-4000-8000-000000000000"], {
      DROVER_ADDRESS: "127.0.0.1:1",
    });
    expect(unreachable.code).toBe(EXIT.unreachable);
    expect(unreachable.stderr).toMatch(/^drover: cannot reach the coordinator at 127\.0\.0\.1:1: /);
    expect(unreachable.stderr).not.toMatch(/ERR_PNPM|ELIFECYCLE/);

    const missing = await droverBin(["status", "00000000-0000-4000-8000-000000000000"], {
      DROVER_ADDRESS: cluster.coordinator.address,
      DROVER_TOKEN: cluster.tokens.admin!,
    });
    expect(missing.code).toBe(EXIT.notFound);
    expect((await droverBin(["frobnicate"])).code).toBe(EXIT.usage);
  });
});
