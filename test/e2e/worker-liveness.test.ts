import { readFileSync } from "node:fs";
import { join } from "node:path";
import { accountFor, accountingProblems, type ServiceProcess } from "@drover/local-cluster";
import { type Run, RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness, until, watchToEnd } from "../support/cluster-harness.js";

/**
 * A dead worker's tasks are taken over within seconds, through its liveness record, while the
 * stale-lock threshold stays at its default 90 s; a worker frozen for less than its liveness
 * timeout keeps its task; one frozen for longer comes back fenced. Real processes, real signals.
 */
const LIVENESS_MS = 6_000;
let h: Harness;

beforeAll(async () => {
  h = await openClusterHarness({
    coordinators: 1,
    workers: 2,
    laneWidth: 2,
    sandbox: {
      organizations: 300,
      persons: 500,
      deals: 300,
      leads: 100,
      activities: 200,
      notes: 200,
      "mail-per-deal-max": 3,
      "latency-ms": 40,
      "malformed-rate": 0.01,
    },
    env: {
      DROVER_REAPER_INTERVAL_MS: "500",
      DROVER_WORKER_LIVENESS_MS: String(LIVENESS_MS),
    },
  });
});

afterAll(async () => {
  await h?.close();
});

// Windows smaller than pages, so a task is caught between two committed windows of one page.
const settings = { pageSize: "100", stripes: "2", windowSize: "25" };
let tenants = 0;

async function startRun(): Promise<{ runId: string; tenantId: string; since: Date }> {
  const tenantId = `liveness-${++tenants}`;
  const since = new Date();
  const { run } = await h.client.startRun({
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
  // A window written by the fenced attempt and again by its successor would show as "already here".
  expect(last.progress.map((p) => [p.kind, p.alreadyHere])).toEqual(last.progress.map((p) => [p.kind, 0n]));
}

type HeldTask = {
  id: string;
  locked_by: string;
  processed_offset: number;
  attempts: number;
};

async function task(id: string): Promise<HeldTask & { status: string }> {
  const [t] = await h.database.db.execute<HeldTask & { status: string }>(sql`
    select id, status, locked_by, processed_offset, attempts from drover.tasks where id = ${id}`);
  return t!;
}

/**
 * A task past its first window, its worker frozen (SIGSTOP) while it still holds it under the same
 * claim: a task that finished between the look and the freeze would prove nothing.
 */
async function freezeHolder(runId: string): Promise<{ held: HeldTask; worker: ServiceProcess }> {
  return until("a task past its first window, frozen mid-way", async () => {
    const [candidate] = await h.database.db.execute<HeldTask>(sql`
      select id, locked_by, processed_offset, attempts from drover.tasks
       where run_id = ${runId}::uuid and status = 'running' and processed_offset > 0 limit 1`);
    if (!candidate) return undefined;
    const worker = h.cluster.workers.find((w) => w.name === candidate.locked_by.split("/")[0]);
    if (!worker) return undefined;
    worker.signal("SIGSTOP");
    const still = await task(candidate.id);
    if (still.status === "running" && still.locked_by === candidate.locked_by)
      return { held: candidate, worker };
    worker.signal("SIGCONT");
    return undefined;
  });
}

function log(worker: ServiceProcess): string {
  return readFileSync(join(h.cluster.logDir, `${worker.name}.log`), "utf8");
}

describe("dead workers are found by their liveness record", () => {
  it("SIGKILL a worker holding a task: the other worker resumes it long before the stale threshold", async () => {
    const { runId, tenantId, since } = await startRun();
    const { held, worker } = await freezeHolder(runId);
    worker.signal("SIGKILL");
    const killedAt = Date.now();
    await worker.exited;
    const resumed = await until(
      "another worker to claim the killed worker's task",
      async () => {
        const t = await task(held.id);
        return t.locked_by && t.locked_by !== held.locked_by ? t : t.status === "succeeded" ? t : undefined;
      },
      60_000,
    );
    const seconds = (Date.now() - killedAt) / 1000;
    process.stdout.write(`takeover after SIGKILL: ${seconds.toFixed(1)} s (stale threshold 90 s)\n`);
    // The liveness timeout (6 s) plus a reaper pass and a dispatch; the stale lock would take 90 s.
    expect(seconds).toBeLessThan(45);
    expect(resumed.attempts).toBeGreaterThanOrEqual(2);
    await h.cluster.addWorker();
    await expectAccounted(tenantId, since, await watchToEnd(h.client, runId));
  });

  it("a worker frozen for less than its liveness timeout keeps its task under the same claim", async () => {
    const { runId, tenantId, since } = await startRun();
    const { held, worker } = await freezeHolder(runId);
    await new Promise((r) => setTimeout(r, LIVENESS_MS / 3));
    const during = await task(held.id);
    worker.signal("SIGCONT");
    expect(during).toMatchObject({ status: "running", locked_by: held.locked_by, attempts: held.attempts });
    await expectAccounted(tenantId, since, await watchToEnd(h.client, runId));
    // The attempt went on under its claim: it was never handed to another one.
    expect((await task(held.id)).attempts).toBe(held.attempts);
  });

  it("a worker frozen past its liveness timeout loses its task, and when thawed its late window is refused", async () => {
    const { runId, tenantId, since } = await startRun();
    const { held, worker } = await freezeHolder(runId);
    try {
      await until(
        "the reaper to hand the frozen worker's task on",
        async () => (await task(held.id)).locked_by !== held.locked_by,
        // Frozen inside a window's transaction, the task waits for the server to end that
        // transaction (the window deadline, 60 s); otherwise the liveness timeout is enough.
        120_000,
      );
    } finally {
      worker.signal("SIGCONT");
    }
    await until(
      "the thawed worker to learn its record expired and register again",
      async () => log(worker).includes("liveness record expired"),
      30_000,
    );
    await expectAccounted(tenantId, since, await watchToEnd(h.client, runId));
    // Its attempt ended as a lost claim: nothing it did after the thaw was written.
    const ended = log(worker)
      .split("\n")
      .filter((l) => l.includes(`"task_id":${held.id},`) && l.includes("task ended"));
    expect(ended[0]).toContain('"outcome":"lost"');
    // The thawed worker registered again and is alive: the pool has both workers' slots.
    const [live] = await h.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from drover.workers where expires_at > now() and worker_id = ${worker.name}`,
    );
    expect(live!.n).toBe(1);
  });
});
