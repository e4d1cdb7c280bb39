import { accountFor, accountingProblems } from "@drover/local-cluster";
import { type Run, RunStatus, timestampDate } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness, until, watchToEnd } from "../support/cluster-harness.js";
import { CHANGED_COLUMN, sourceDeletionProblems } from "../support/mid-run-changes.js";

/**
 * A run that follows its source until cutover (issue 18 §4), with real processes: it imports, then
 * catches the customer's rounds of edits, additions and deletions pass after pass, survives a killed
 * worker and a stop and resume in the middle of that, and ends exact at CompleteRun.
 */
let h: Harness;

const EDITS = 3;
const ADDS = 2;
const DELETES = 2;

beforeAll(async () => {
  h = await openClusterHarness({
    workers: 2,
    laneWidth: 2,
    sandbox: {
      organizations: 120,
      persons: 200,
      deals: 150,
      leads: 60,
      activities: 150,
      notes: 120,
      "mail-per-deal-max": 2,
      "latency-ms": 5,
      "malformed-rate": 0.01,
      "change-edits": EDITS,
      "change-adds": ADDS,
      "change-deletes": DELETES,
    },
    env: {
      DROVER_SWEEP_INTERVAL_MS: "300",
      DROVER_STALE_TASK_MS: "5000",
      DROVER_REDISPATCH_AFTER_MS: "5000",
    },
  });
});

afterAll(async () => {
  await h?.close();
});

const settings = { pageSize: "100", stripes: "2", windowSize: "25" };
let tenants = 0;

type Truth = {
  kinds: Record<
    string,
    { ids: string[]; malformed: string[]; edited: string[]; added: string[]; deleted: string[] }
  >;
};

async function sandboxTruth(): Promise<Truth> {
  return (await (await fetch(`${h.cluster.sandboxUrl}/__sandbox/truth`)).json()) as Truth;
}

/**
 * Rows an earlier test's rounds deleted before this run began (the tests share one sandbox): no
 * list shows them any more, so this run never sees them, rightly. Deals stay listed (deleted).
 */
async function goneBefore(): Promise<Map<string, Set<string>>> {
  const truth = await sandboxTruth();
  return new Map(
    Object.entries(truth.kinds)
      .filter(([kind]) => kind !== "deals")
      .map(([kind, t]) => [kind, new Set(t.deleted ?? [])]),
  );
}

async function startFollowing(
  intervalSeconds = 2,
): Promise<{ runId: string; tenantId: string; since: Date; gone: Map<string, Set<string>> }> {
  const tenantId = `follower-${++tenants}`;
  const gone = await goneBefore();
  const since = new Date();
  const { run } = await h.client.startRun({
    tenantId,
    source: "crm",
    sourceAccount: "sandbox",
    sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: "t", settings },
    follow: true,
    followIntervalSeconds: intervalSeconds,
  });
  expect(run!.follow?.intervalSeconds).toBe(intervalSeconds);
  return { runId: run!.id, tenantId, since, gone };
}

async function getRun(runId: string): Promise<Run> {
  return (await h.client.getRun({ runId })).run!;
}

/** Waits until a pass that started after `after` has finished: it has seen everything changed before. */
async function passFinishedAfter(runId: string, after: Date, timeoutMs = 120_000): Promise<Run> {
  return until(
    `a follow pass begun after ${after.toISOString()} to finish`,
    async () => {
      const run = await getRun(runId);
      const done = run.follow?.passes.find(
        (p) => p.finishedAt && p.startsAt && timestampDate(p.startsAt).getTime() > after.getTime(),
      );
      return done ? run : undefined;
    },
    timeoutMs,
  );
}

/** Applies a round of changes at the sandbox; returns when it applied. */
async function changeRound(again: boolean): Promise<Date> {
  const res = await fetch(`${h.cluster.sandboxUrl}/__sandbox/changes${again ? "?again=1" : ""}`, {
    method: "POST",
  });
  const body = (await res.json()) as { applied: boolean; at: string; round: number };
  expect(body.applied).toBe(true);
  return new Date(body.at);
}

async function round(): Promise<number> {
  const res = await fetch(`${h.cluster.sandboxUrl}/__sandbox/changes?again=1`, { method: "POST" });
  return ((await res.json()) as { round: number }).round;
}

/**
 * The product holds what the source holds now: every source row accounted for once, the latest
 * round's edits on every record Drover created, the deals the source deleted marked deleted.
 */
async function expectInStep(
  tenantId: string,
  since: Date,
  rounds: number,
  goneEarlier: Map<string, Set<string>>,
): Promise<number> {
  const truth = await sandboxTruth();
  for (const [kind, ids] of goneEarlier) {
    const t = truth.kinds[kind]!;
    t.ids = t.ids.filter((id) => !ids.has(id));
    t.deleted = t.deleted.filter((id) => !ids.has(id));
  }
  const accounts = await accountFor(
    h.database.db,
    { tenantId, source: "crm", sourceAccount: "sandbox", since },
    truth.kinds as never,
  );
  expect(accountingProblems(accounts)).toEqual([]);
  const suffix = rounds === 1 ? " (edited)" : ` (edited ${rounds})`;
  for (const [kind, { table, label }] of Object.entries(CHANGED_COLUMN)) {
    const t = truth.kinds[kind]!;
    const rows = await h.database.db.execute<{ source_id: string; action: string; label: string | null }>(sql`
      select l.source_id, l.action, d.${sql.identifier(label)}::text as label
        from drover.ledger l join ${sql.identifier("app")}.${sql.identifier(table)} d on d.id = l.record_id
       where l.tenant_id = ${tenantId} and l.kind = ${kind} and l.action = 'created'`);
    const byId = new Map(rows.map((r) => [r.source_id, r]));
    const stale = t.edited
      .filter((id) => !t.malformed.includes(id) && byId.has(id))
      .filter((id) => !String(byId.get(id)!.label).endsWith(suffix));
    expect(stale, `${kind}: edited rows without the latest edit`).toEqual([]);
  }
  // Deals the source deleted are marked so on their records; held rows of other kinds the source
  // deleted (no list reports them) are marked in the ledger once a pass confirmed them gone by id.
  const deletions = await sourceDeletionProblems(
    h.database.db,
    { tenantId, sourceAccount: "sandbox" },
    truth.kinds,
  );
  expect(deletions.problems).toEqual([]);
  return deletions.heldGone;
}

async function runningFollowTasks(runId: string) {
  return h.database.db.execute<{ id: string; locked_by: string; seed_key: string }>(sql`
    select id, locked_by, seed_key from drover.tasks
     where run_id = ${runId}::uuid and status = 'running' and seed_key like 'follow%'`);
}

describe("a run that follows its source", () => {
  it("catches three rounds of edits, additions and deletions, pass after pass, and ends exact at CompleteRun", async () => {
    const { runId, tenantId, since, gone } = await startFollowing(2);
    // The import ends in its own catch-up (pass 0); the run goes on following.
    const imported = await passFinishedAfter(runId, new Date(0), 180_000);
    expect(imported.status).toBe(RunStatus.RUNNING);
    expect(imported.follow!.replicationLagSeconds).toBeDefined();

    let heldGone = 0;
    for (let r = 1; r <= 3; r++) {
      const at = await changeRound(r > 1);
      const run = await passFinishedAfter(runId, at);
      expect(run.status).toBe(RunStatus.RUNNING);
      // A pass begun after the round has applied it: in step before any cutover.
      heldGone = await expectInStep(tenantId, since, r, gone);
    }
    // Most of what the rounds deleted was imported (a row the run skipped or failed is not held).
    expect(heldGone).toBeGreaterThanOrEqual(3 * DELETES * 5 - 3);
    const before = await getRun(runId);
    const changed = before.follow!.passes.filter((p) => p.index > 0 && p.changes > 0n);
    // Each deletion of a held row was applied once, by one pass, and counted there.
    const deletions = before.follow!.passes.reduce((n, p) => n + Number(p.deletions), 0);
    expect(deletions).toBe(heldGone);
    // Each round's changes were applied by a pass of their own: three passes with changes.
    expect(changed.length).toBeGreaterThanOrEqual(3);
    expect(before.follow!.passes.filter((p) => p.index > 0).length).toBeGreaterThanOrEqual(3);
    // Passes ask for what changed since the previous one began.
    for (const p of before.follow!.passes.slice(1)) {
      const previous = before.follow!.passes[p.index - 1]!;
      expect(timestampDate(p.since!).getTime()).toBe(timestampDate(previous.startsAt!).getTime());
    }

    const { run: cut } = await h.client.completeRun({ runId });
    expect(cut!.follow!.cutoverAt).toBeDefined();
    const last = await watchToEnd(h.client, runId);
    expect(last.status).toBe(RunStatus.SUCCEEDED);
    // The final pass began at or after the cutover.
    const final = last.follow!.passes.at(-1)!;
    expect(timestampDate(final.startsAt!).getTime()).toBeGreaterThanOrEqual(
      timestampDate(last.follow!.cutoverAt!).getTime(),
    );
    expect(final.finishedAt).toBeDefined();
    await expectInStep(tenantId, since, 3, gone);
  });

  it("a worker killed during a follow pass: another takes the pass on and nothing is lost", async () => {
    const { runId, tenantId, since, gone } = await startFollowing(2);
    await passFinishedAfter(runId, new Date(0), 90_000);
    // A slow source keeps the pass's tasks under their claims long enough to be caught there.
    await fetch(`${h.cluster.sandboxUrl}/__sandbox/faults?latencyMs=250`, { method: "POST" });
    const rounds = await round();
    const applied = new Date();
    const victim = await until(
      "a follow pass's task under a claim",
      async () => (await runningFollowTasks(runId))[0],
    );
    const worker = h.cluster.workers.find((w) => w.name === victim.locked_by.split("/")[0])!;
    worker.signal("SIGKILL");
    await worker.exited;
    await fetch(`${h.cluster.sandboxUrl}/__sandbox/faults?latencyMs=5`, { method: "POST" });
    await h.cluster.addWorker();
    await passFinishedAfter(runId, applied, 90_000);
    await h.client.completeRun({ runId });
    const last = await watchToEnd(h.client, runId);
    expect(last.status).toBe(RunStatus.SUCCEEDED);
    await expectInStep(tenantId, since, rounds, gone);
    const [task] = await h.database.db.execute<{ status: string; attempts: number }>(
      sql`select status, attempts from drover.tasks where id = ${victim.id}`,
    );
    expect(task).toMatchObject({ status: "succeeded" });
  });

  it("stops and resumes while following: the pass waiting for its start runs at resume, and the run goes on", async () => {
    const { runId, tenantId, since, gone } = await startFollowing(60);
    await passFinishedAfter(runId, new Date(0), 90_000);
    // The next pass waits a minute for its start: the stop cancels it where it stands.
    await h.client.stopRun({ runId });
    const stopped = await until("the run stopped", async () => {
      const run = await getRun(runId);
      return run.status === RunStatus.STOPPED ? run : undefined;
    });
    expect(stopped.follow!.passes.at(-1)!.finishedAt).toBeUndefined();
    const rounds = await round();
    const waiting = stopped.follow!.passes.at(-1)!.index;
    await h.client.resumeRun({ runId });
    // Resumed, the waiting pass starts at once and sees the round made while the run was stopped.
    // It is named by its index: the pass before it may have begun within a second of the resume.
    const run = await until(
      `follow pass ${waiting} to finish after the resume`,
      async () => {
        const r = await getRun(runId);
        return r.follow?.passes.some((p) => p.index >= waiting && p.finishedAt) ? r : undefined;
      },
      30_000,
    );
    expect(run.status).toBe(RunStatus.RUNNING);
    await expectInStep(tenantId, since, rounds, gone);
    await h.client.completeRun({ runId });
    const last = await watchToEnd(h.client, runId);
    expect(last.status).toBe(RunStatus.SUCCEEDED);
    await expectInStep(tenantId, since, rounds, gone);
  });

  it("refuses CompleteRun for a run that does not follow, and follow_interval_seconds without follow", async () => {
    await expect(
      h.client.startRun({
        tenantId: "not-following",
        source: "crm",
        sourceAccount: "sandbox",
        sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: "t", settings },
        followIntervalSeconds: 5,
      }),
    ).rejects.toThrow(/follow_interval_seconds is set but follow is not/);
    await expect(
      h.client.startRun({
        tenantId: "not-following",
        source: "crm",
        sourceAccount: "sandbox",
        sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: "t", settings },
        follow: true,
        followIntervalSeconds: 0,
      }),
    ).rejects.toThrow(/follow_interval_seconds must be/);
    const { run } = await h.client.startRun({
      tenantId: "not-following",
      source: "crm",
      sourceAccount: "sandbox",
      sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: "t", settings },
    });
    await expect(h.client.completeRun({ runId: run!.id })).rejects.toThrow(/does not follow its source/);
    await h.client.stopRun({ runId: run!.id });
    await watchToEnd(h.client, run!.id);
  });
});
