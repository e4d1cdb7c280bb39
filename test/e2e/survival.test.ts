import { readFileSync } from "node:fs";
import { join } from "node:path";
import { bearer } from "@drover/auth";
import { accountFor, accountingProblems } from "@drover/local-cluster";
import { createClient, type Run, RunService, RunStatus } from "@drover/proto";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, NATS_URL, openClusterHarness, until, watchToEnd } from "../support/cluster-harness.js";

/**
 * Runs survive: killed workers, a killed leader, a deleted stream, stops, resumes and retries,
 * with real processes. Every scenario ends with the same accounting: nothing lost, nothing twice.
 */
let h: Harness;

beforeAll(async () => {
  h = await openClusterHarness({
    coordinators: 2,
    workers: 3,
    laneWidth: 2,
    sandbox: {
      organizations: 300,
      persons: 500,
      deals: 400,
      leads: 100,
      activities: 300,
      notes: 300,
      "mail-per-deal-max": 3,
      "latency-ms": 15,
      "malformed-rate": 0.01,
    },
    env: {
      DROVER_SWEEP_INTERVAL_MS: "500",
      DROVER_STALE_TASK_MS: "5000",
      DROVER_REDISPATCH_AFTER_MS: "5000",
      DROVER_SHUTDOWN_GRACE_MS: "8000",
      DROVER_MAX_ATTEMPTS: "2",
    },
  });
});

afterAll(async () => {
  await h?.close();
});

// Windows smaller than pages, so a task is caught between two committed windows of one page.
const settings = { pageSize: "100", stripes: "2", windowSize: "25" };
let tenants = 0;

async function startRun(client = h.client): Promise<{ runId: string; tenantId: string; since: Date }> {
  const tenantId = `survivor-${++tenants}`;
  const since = new Date();
  const { run } = await client.startRun({
    tenantId,
    source: "crm",
    sourceAccount: "sandbox",
    sourceConfig: { baseUrl: h.cluster.sandboxUrl, apiToken: "t", settings },
  });
  return { runId: run!.id, tenantId, since };
}

async function expectAccounted(tenantId: string, since: Date, last: Run): Promise<void> {
  expect(last.status).toBe(RunStatus.SUCCEEDED);
  const truth = await h.truth();
  const accounts = await accountFor(
    h.database.db,
    { tenantId, source: "crm", sourceAccount: "sandbox", since },
    truth.kinds,
  );
  expect(accountingProblems(accounts)).toEqual([]);
  // A row committed once and written again would show as "already here": none may.
  expect(last.progress.map((p) => [p.kind, p.alreadyHere])).toEqual(last.progress.map((p) => [p.kind, 0n]));
}

async function runningTasks(runId: string) {
  return h.database.db.execute<{
    id: string;
    locked_by: string;
    processed_offset: number;
    rows_read: string;
    kind: string;
  }>(sql`
    select id, locked_by, processed_offset, rows_read, kind from drover.tasks
     where run_id = ${runId}::uuid and status = 'running'`);
}

async function faults(query: string): Promise<void> {
  const res = await fetch(`${h.cluster.sandboxUrl}/__sandbox/faults?${query}`, { method: "POST" });
  expect(res.status).toBe(200);
}

describe("runs that survive", () => {
  it("SIGKILL a worker mid-task: another resumes from the checkpoint and no row is written twice", async () => {
    const { runId, tenantId, since } = await startRun();
    // Freeze the worker first, then make sure its task is still mid-way under its claim before the
    // kill: a task that finished between the look and the kill would prove nothing. Mid-way is any
    // time after its first committed window (rows_read counts them), not only inside a page
    // (processed_offset > 0): a task walks many pages, and between two of them its offset is 0 with
    // its cursor on the next page, so at a quick pace the look could miss every in-page moment.
    const victim = await until("a task past its first window, frozen mid-way", async () => {
      const candidate = (await runningTasks(runId)).find(
        (t) => t.processed_offset > 0 || Number(t.rows_read) > 0,
      );
      if (!candidate) return undefined;
      const holder = h.cluster.workers.find((w) => w.name === candidate.locked_by.split("/")[0]);
      if (!holder) return undefined;
      holder.signal("SIGSTOP");
      const still = (await runningTasks(runId)).find(
        (t) => t.id === candidate.id && t.locked_by === candidate.locked_by,
      );
      if (still) return candidate;
      holder.signal("SIGCONT");
      return undefined;
    });
    const workerId = victim.locked_by.split("/")[0]!;
    const worker = h.cluster.workers.find((w) => w.name === workerId)!;
    worker.signal("SIGKILL");
    await worker.exited;
    await h.cluster.addWorker();

    const last = await watchToEnd(h.client, runId);
    await expectAccounted(tenantId, since, last);
    const [task] = await h.database.db.execute<{ attempts: number; status: string }>(
      sql`select attempts, status from drover.tasks where id = ${victim.id}`,
    );
    expect(task).toMatchObject({ status: "succeeded" });
    expect(task!.attempts).toBeGreaterThanOrEqual(2);
  });

  it("SIGTERM a worker: it hands its tasks back within the grace time and exits cleanly", async () => {
    const { runId, tenantId, since } = await startRun();
    const busy = await until("a worker with running tasks", async () => (await runningTasks(runId))[0]);
    const workerId = busy.locked_by.split("/")[0]!;
    const worker = h.cluster.workers.find((w) => w.name === workerId)!;
    const started = Date.now();
    const code = await worker.stop("SIGTERM", 20_000);
    const elapsed = Date.now() - started;
    expect(code).toBe(0);
    expect(elapsed).toBeLessThan(8_000);
    const stillHeld = (await runningTasks(runId)).filter((t) => t.locked_by.startsWith(`${workerId}/`));
    expect(stillHeld).toEqual([]);
    await h.cluster.addWorker();
    await expectAccounted(tenantId, since, await watchToEnd(h.client, runId));
  });

  it("kill the leader coordinator: the other takes over and the run finishes", async () => {
    const leaderLog = (name: string) => readFileSync(join(h.cluster.logDir, `${name}.log`), "utf8");
    const leader = await until("a leader", async () =>
      h.cluster.coordinators.find((c) => leaderLog(c.name).includes("took the leader lease")),
    );
    const survivor = h.cluster.coordinators.find((c) => c !== leader)!;
    const client = createClient(RunService, String(survivor.ready.address), {
      metadata: () => bearer(h.cluster.adminToken),
    });
    try {
      const { runId, tenantId, since } = await startRun(client);
      await until("tasks running", async () => (await runningTasks(runId)).length > 0);
      leader.signal("SIGKILL");
      await leader.exited;
      await until(
        "the survivor to take the lease",
        async () => leaderLog(survivor.name).includes("took the leader lease"),
        30_000,
      );
      await expectAccounted(tenantId, since, await watchToEnd(client, runId));
    } finally {
      client.close();
    }
  });

  it("delete the task stream mid-run: the reaper publishes again and the run finishes", async () => {
    const live = await liveClient();
    try {
      const { runId, tenantId, since } = await startRun(live);
      await until("tasks running", async () => (await runningTasks(runId)).length > 0);
      const nc = await connect({ servers: NATS_URL });
      try {
        await (await jetstreamManager(nc)).streams.delete(
          `${h.queuePrefix.toUpperCase().replace(/-/g, "_")}_TASKS`,
        );
      } finally {
        await nc.close();
      }
      await expectAccounted(tenantId, since, await watchToEnd(live, runId));
    } finally {
      live.close();
    }
  });

  it("stop a run with long tasks: it lands within 5 s, and resume finishes exactly the rest", async () => {
    const live = await liveClient();
    try {
      await faults("latencyMs=150");
      const { runId, tenantId, since } = await startRun(live);
      await until("tasks past a window", async () =>
        (await runningTasks(runId)).some((t) => t.processed_offset > 0),
      );
      const asked = Date.now();
      await live.stopRun({ runId });
      const stopped = await watchToEnd(live, runId);
      const latency = Date.now() - asked;
      expect(stopped.status).toBe(RunStatus.STOPPED);
      expect(latency).toBeLessThan(5_000);
      process.stdout.write(`stop latency: ${latency} ms\n`);

      await faults("latencyMs=15");
      await live.resumeRun({ runId });
      await expectAccounted(tenantId, since, await watchToEnd(live, runId));
    } finally {
      await faults("latencyMs=15");
      live.close();
    }
  });

  it("retry after a failure re-arms the failed tasks and finishes with every row accounted for", async () => {
    const live = await liveClient();
    try {
      await faults("transientErrorRate=1");
      const { runId, tenantId, since } = await startRun(live);
      const failed = await watchToEnd(live, runId);
      expect(failed.status).toBe(RunStatus.FAILED);
      expect(failed.error).toMatch(/gave up after 2 attempts/);

      await faults("transientErrorRate=0");
      await live.retryRun({ runId });
      await expectAccounted(tenantId, since, await watchToEnd(live, runId));
    } finally {
      await faults("transientErrorRate=0");
      live.close();
    }
  });
});

/** A client to a coordinator that is still alive (an earlier test kills the leader). */
async function liveClient() {
  for (const c of h.cluster.coordinators) {
    const alive = await Promise.race([
      c.exited.then(() => false),
      new Promise<boolean>((r) => setTimeout(() => r(true), 10)),
    ]);
    if (alive)
      return createClient(RunService, String(c.ready.address), {
        metadata: () => bearer(h.cluster.adminToken),
      });
  }
  throw new Error("no coordinator alive");
}
