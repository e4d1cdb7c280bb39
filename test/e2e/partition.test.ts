import { readFileSync } from "node:fs";
import { join } from "node:path";
import { accountFor, accountingProblems, type ServiceProcess } from "@drover/local-cluster";
import { type Run, RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, NATS_URL, openClusterHarness, until, watchToEnd } from "../support/cluster-harness.js";
import { type IsolatedHost, netnsProblem, startIsolatedHost } from "../support/netns.js";
import { startTcpForwarder, type TcpForwarder } from "../support/tcp-forwarder.js";

/**
 * Hosts that lose each other: a worker on a host of its own (a network namespace joined by a veth
 * pair) whose link is cut mid-task and comes back later, with real processes. Postgres, NATS, the
 * coordinator and the CRM sandbox listen on loopback only, so the namespaced worker reaches them
 * through forwarders on the veth's root end; cutting the link cuts all of them at once, and every
 * connection stays open, silent, as in a real partition.
 *
 * Needs root and network namespaces (CI here has both); elsewhere the file is skipped and says why.
 */
const problem = await netnsProblem();
if (problem) console.warn(`partition tests skipped: ${problem}`);

const hostPort = (address: string) => {
  const url = new URL(address.includes("://") ? address : `tcp://${address}`);
  return { host: url.hostname, port: Number(url.port) };
};

describe.skipIf(problem !== undefined)("hosts that lose each other", () => {
  let host: IsolatedHost;
  let h: Harness;
  const forwarders: TcpForwarder[] = [];
  /** Forwards the veth's root end to a loopback service; returns the address the namespace uses. */
  const forward = async (target: string) => {
    const f = await startTcpForwarder(host.hostAddress, hostPort(target));
    forwarders.push(f);
    return f.address;
  };

  beforeAll(async () => {
    host = await startIsolatedHost();
    h = await openClusterHarness({
      coordinators: 1,
      workers: 1,
      laneWidth: 2,
      sandbox: {
        organizations: 200,
        persons: 1200,
        deals: 200,
        leads: 100,
        activities: 200,
        notes: 200,
        "mail-per-deal-max": 1,
        "latency-ms": 25,
      },
      env: {
        DROVER_SWEEP_INTERVAL_MS: "500",
        // A lock this old belongs to a dead (or unreachable) worker: the reaper hands its task on.
        DROVER_STALE_TASK_MS: "5000",
        DROVER_REDISPATCH_AFTER_MS: "5000",
        DROVER_SHUTDOWN_GRACE_MS: "3000",
      },
    });
  });

  afterAll(async () => {
    if (host?.isCut) await host.heal();
    await h?.close();
    for (const f of forwarders) await f.close();
    await host?.close();
  });

  const runningTasks = (runId: string) =>
    h.database.db.execute<{ id: string; locked_by: string; processed_offset: number; kind: string }>(sql`
      select id::text, locked_by, processed_offset, kind from drover.tasks
       where run_id = ${runId}::uuid and status = 'running'`);

  async function expectAccounted(tenantId: string, since: Date, last: Run): Promise<void> {
    expect(last.status).toBe(RunStatus.SUCCEEDED);
    const accounts = await accountFor(
      h.database.db,
      { tenantId, source: "crm", sourceAccount: "sandbox", since },
      (await h.truth()).kinds,
    );
    expect(accountingProblems(accounts)).toEqual([]);
    // A row committed once and written again would show as "already here": none may.
    expect(last.progress.map((p) => [p.kind, p.alreadyHere])).toEqual(last.progress.map((p) => [p.kind, 0n]));
  }

  it("a worker cut off mid-task: another worker takes the task over, and the cut worker's late window is refused when the link comes back", async () => {
    const database = hostPort(h.testDb.url);
    const databaseUrl = new URL(h.testDb.url);
    const [pg, nats, coordinator, sandbox] = [
      await forward(`${database.host}:${database.port}`),
      await forward(NATS_URL),
      await forward(h.cluster.coordinatorAddresses[0]!),
      await forward(h.cluster.sandboxUrl),
    ];
    databaseUrl.host = pg;
    const cutOff: ServiceProcess = await h.cluster.addWorker({
      launcher: host.launcher,
      env: {
        DATABASE_URL: databaseUrl.toString(),
        NATS_URL: nats,
        DROVER_COORDINATOR_ADDRESS: coordinator,
      },
    });

    const tenantId = "partitioned-worker";
    const since = new Date();
    const { run } = await h.client.startRun({
      tenantId,
      source: "crm",
      sourceAccount: "sandbox",
      // Both workers reach the sandbox at the veth's root end: the namespaced one only through it.
      sourceConfig: {
        baseUrl: `http://${sandbox}`,
        apiToken: "t",
        settings: { pageSize: "50", stripes: "2", windowSize: "25" },
      },
    });
    const runId = run!.id;

    // A task of the namespaced worker past its first window: the cut catches it mid-way.
    const victim = await until("a task of the namespaced worker past its first window", async () =>
      (await runningTasks(runId)).find(
        (t) => t.locked_by.startsWith(`${cutOff.name}/`) && t.processed_offset > 0,
      ),
    );
    await host.cut();

    // Unreachable, the worker stops touching its lock; the reaper hands the task on, and the
    // worker on the root namespace claims it, all while the link is down.
    const takenOver = await until(
      "the cut worker's task claimed by another worker",
      async () => {
        const [t] = await h.database.db.execute<{ locked_by: string | null; status: string }>(
          sql`select locked_by, status from drover.tasks where id = ${victim.id}::bigint`,
        );
        return t && t.locked_by !== null && !t.locked_by.startsWith(`${cutOff.name}/`) ? t : undefined;
      },
      90_000,
    );
    expect(takenOver.locked_by).toMatch(/^worker-1\//);
    expect(host.isCut).toBe(true);

    await host.heal();
    const last = await watchToEnd(h.client, runId);
    await expectAccounted(tenantId, since, last);

    // Back on the network, the cut worker finds its claim gone: its late window is refused by the
    // claim-token fence, and it reports the attempt lost instead of writing.
    const log = join(h.cluster.logDir, `${cutOff.name}.log`);
    const outcome = await until(
      "the cut worker's outcome for its old task",
      async () =>
        readFileSync(log, "utf8")
          .split("\n")
          .filter((line) => line.startsWith("{"))
          .map((line) => JSON.parse(line) as { task_id?: number; outcome?: string })
          .find((entry) => String(entry.task_id) === victim.id && entry.outcome !== undefined),
      60_000,
    );
    expect(outcome.outcome).toBe("lost");
    const [task] = await h.database.db.execute<{ status: string; attempts: number }>(
      sql`select status, attempts from drover.tasks where id = ${victim.id}::bigint`,
    );
    expect(task).toMatchObject({ status: "succeeded" });
  });
});
