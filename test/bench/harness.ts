import { randomBytes } from "node:crypto";
import { bearer } from "@drover/auth";
import type { Stats as SandboxStats } from "@drover/crm-sandbox";
import { type Database, openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { type Cluster, type SandboxSource, startCluster } from "@drover/local-cluster";
import { type Client, createClient, type Run, RunService, RunStatus } from "@drover/proto";
import { taskQueueNames, webhookEventNames } from "@drover/task-queue";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

export type { SandboxStats };

export const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const SOURCE = "crm";
export const API_TOKEN = "bench-api-token";

/** One scenario's services: a fresh database, a private JetStream stream, the processes of a cluster. */
export interface BenchCluster {
  testDb: TestDatabase;
  /** A small pool on the scenario's database, for the bench's own reads (and the plain writer). */
  database: Database;
  cluster: Cluster;
  client: Client<typeof RunService>;
  queuePrefix: string;
  sandboxStats(): Promise<SandboxStats>;
  resetSandboxStats(): Promise<void>;
  /** Starts a run and waits for its end; the sandbox's stats are read the moment it ends. */
  runToEnd(request: RunRequest, timeoutMs: number): Promise<RunOutcome>;
  /** Stops workers and coordinators, keeping the sandbox up (the plain writer reads from it). */
  stopEngine(): Promise<void>;
  /** Stops every process and waits until none of them is connected to the database any more. */
  stopAll(): Promise<void>;
  /** stopAll, then deletes the stream and drops the database. */
  close(): Promise<void>;
  /**
   * close, not waited for: a scenario whose figures are taken lets the next one start while its
   * processes stop and its database is dropped (~1.3 s, mostly idle). The runner waits for every
   * one of them before it prints (settleClosings).
   */
  closeLater(): void;
}

export interface ClusterSpec {
  /** Names the queue prefix and the log folder (.artifacts/logs/<prefix>/). */
  name: string;
  workers: number;
  laneWidth: number;
  sandbox: Record<string, string | number>;
  /** Which source's sandbox (the CRM one unless told). */
  sandboxSource?: SandboxSource;
  env?: Record<string, string>;
  /** Coordinators (1 when not given); the workers are pointed at them in turn. */
  coordinators?: number;
}

export interface RunRequest {
  tenantId: string;
  sourceAccount: string;
  kinds: string[];
  settings: Record<string, string>;
  /** Another source than the CRM sandbox, e.g. pg-table with its connection string as the secret. */
  source?: { name: string; baseUrl: string; apiToken: string };
  /** A dry run (StartRunRequest.dry_run): walks the source, writes nothing. */
  dryRun?: boolean;
}

export interface RunOutcome {
  run: Run;
  /** The sandbox's counters as the run ended, before anything after it (verification) called the source. */
  stats: SandboxStats;
  /** drover.runs started_at / finished_at, epoch ms. */
  startedAt: number;
  finishedAt: number;
}

/** Clusters not closed yet, so that an interrupted bench can still stop its processes. */
const openClusters = new Set<BenchCluster>();

export async function closeOpenClusters(): Promise<void> {
  await Promise.allSettled([...openClusters].map((c) => c.close()));
}

/** Closes begun by closeLater and not finished yet. */
const closing = new Set<Promise<void>>();

/** Waits for every close begun by closeLater; says which failed (a database not dropped, a process left). */
export async function settleClosings(): Promise<string[]> {
  const outcomes = await Promise.allSettled([...closing]);
  return outcomes.flatMap((o) => (o.status === "rejected" ? [String(o.reason)] : []));
}

export async function openBenchCluster(spec: ClusterSpec): Promise<BenchCluster> {
  const testDb = await createTestDatabase(DATABASE_URL);
  const queuePrefix = `bench-${spec.name.replace(/[^a-zA-Z0-9]/g, "")}-${randomBytes(3).toString("hex")}`;
  let cluster: Cluster;
  try {
    cluster = await startCluster({
      databaseUrl: testDb.url,
      natsUrl: NATS_URL,
      queuePrefix,
      workers: spec.workers,
      laneWidth: spec.laneWidth,
      sandbox: spec.sandbox,
      ...(spec.sandboxSource ? { sandboxSource: spec.sandboxSource } : {}),
      ...(spec.coordinators ? { coordinators: spec.coordinators } : {}),
      env: { LOG_LEVEL: process.env.LOG_LEVEL ?? "warn", ...spec.env },
    });
  } catch (err) {
    await deleteStream(queuePrefix);
    await testDb.drop();
    throw err;
  }
  const database = openDatabase(testDb.url, { max: 4, applicationName: "drover-bench" });
  const client = createClient(RunService, cluster.coordinatorAddresses[0]!, {
    metadata: () => bearer(cluster.adminToken),
  });
  const sandboxStats = async () =>
    (await (await fetch(`${cluster.sandboxUrl}/__sandbox/stats`)).json()) as SandboxStats;

  let engineStopped: Promise<void> | undefined;
  const stopEngine = () => {
    engineStopped ??= (async () => {
      client.close();
      await Promise.all(cluster.workers.map((w) => w.stop()));
      await Promise.all(cluster.coordinators.map((c) => c.stop()));
    })();
    return engineStopped;
  };
  let allStopped: Promise<void> | undefined;
  const stopAll = () => {
    allStopped ??= (async () => {
      await stopEngine();
      await cluster.stop();
      await untilNoOtherBackends(database, testDb.name);
    })();
    return allStopped;
  };

  let closed: Promise<void> | undefined;
  const bench: BenchCluster = {
    testDb,
    database,
    cluster,
    client,
    queuePrefix,
    sandboxStats,
    async resetSandboxStats() {
      const res = await fetch(`${cluster.sandboxUrl}/__sandbox/reset-stats`, { method: "POST" });
      if (!res.ok) throw new Error(`reset-stats answered ${res.status}`);
    },
    async runToEnd(request, timeoutMs) {
      const { run } = await client.startRun({
        tenantId: request.tenantId,
        source: request.source?.name ?? SOURCE,
        sourceAccount: request.sourceAccount,
        kinds: request.kinds,
        sourceConfig: {
          baseUrl: request.source?.baseUrl ?? cluster.sandboxUrl,
          apiToken: request.source?.apiToken ?? API_TOKEN,
          settings: request.settings,
        },
        ...(request.dryRun ? { dryRun: true } : {}),
      });
      const runId = run!.id;
      // Polling the row (every 25 ms) sees the end sooner than WatchRun, and the stats must be read
      // before the leader's automatic verification of the finished run starts calling the source.
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [row] = await database.sql<{ status: string }[]>`
          select status from drover.runs where id = ${runId}::uuid`;
        if (row && ["succeeded", "failed", "stopped"].includes(row.status)) break;
        if (Date.now() > deadline)
          throw new Error(`run ${runId} did not end within ${timeoutMs / 1000} s (logs: ${cluster.logDir})`);
        await sleep(25);
      }
      const stats = await sandboxStats();
      const [times] = await database.sql<{ started: number; finished: number }[]>`
        select (extract(epoch from started_at) * 1000)::float8 as started,
               (extract(epoch from finished_at) * 1000)::float8 as finished
          from drover.runs where id = ${runId}::uuid`;
      const { run: last } = await client.getRun({ runId });
      if (last!.status !== RunStatus.SUCCEEDED) {
        throw new Error(
          `run ${runId} ended ${RunStatus[last!.status]}: ${last!.error || "no error given"} (logs: ${cluster.logDir})`,
        );
      }
      return {
        run: last!,
        stats,
        startedAt: times!.started,
        finishedAt: times!.finished,
      };
    },
    stopEngine,
    stopAll,
    close() {
      closed ??= (async () => {
        try {
          await stopAll();
        } finally {
          openClusters.delete(bench);
          await database.close();
          await deleteStream(queuePrefix);
          await testDb.drop();
        }
      })();
      return closed;
    },
    closeLater() {
      const done = bench.close().finally(() => closing.delete(done));
      closing.add(done);
    },
  };
  openClusters.add(bench);
  return bench;
}

async function deleteStream(queuePrefix: string): Promise<void> {
  const nc = await connect({ servers: NATS_URL });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(taskQueueNames(queuePrefix).stream).catch(() => false);
    // Every coordinator makes the webhook event stream too (follow-events.ts).
    await jsm.streams.delete(webhookEventNames(queuePrefix).stream).catch(() => false);
  } finally {
    await nc.close();
  }
}

/**
 * Waits until no backend but the bench's own pool is connected to the database: a backend that
 * exits flushes its table statistics, so pg_stat_user_tables then holds every write the services made.
 */
async function untilNoOtherBackends(database: Database, dbName: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await database.sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
       where datname = ${dbName} and backend_type = 'client backend'
         and coalesce(application_name, '') <> 'drover-bench'`;
    if (row!.n === 0) return;
    if (Date.now() > deadline) throw new Error(`${row!.n} backend(s) still connected to ${dbName}`);
    await sleep(50);
  }
}

export interface TableWrites {
  inserts: number;
  updates: number;
}

/**
 * n_tup_ins / n_tup_upd of one table of the scenario's database. PostgreSQL 15 keeps these in shared
 * memory, but each backend flushes its own pending counts only at most once a second while busy,
 * within ~10 s once idle, and always when it exits; pg_stat_force_next_flush() works only for the
 * calling backend. So: read after the services' backends are gone (stopAll), and poll until two
 * reads 250 ms apart agree (a backend leaves pg_stat_activity a moment before it flushes).
 */
export async function tableWrites(database: Database, schema: string, table: string): Promise<TableWrites> {
  const read = async (): Promise<TableWrites> => {
    // Outside a transaction, each statement sees fresh statistics (stats_fetch_consistency=cache
    // caches only within one transaction); clear the snapshot anyway in case a pool reuses one.
    await database.sql`select pg_stat_clear_snapshot()`;
    const [row] = await database.sql<{ ins: string | null; upd: string | null }[]>`
      select n_tup_ins::text as ins, n_tup_upd::text as upd from pg_stat_user_tables
       where schemaname = ${schema} and relname = ${table}`;
    return { inserts: Number(row?.ins ?? 0), updates: Number(row?.upd ?? 0) };
  };
  let last = await read();
  for (let i = 0; i < 20; i++) {
    await sleep(250);
    const next = await read();
    if (next.inserts === last.inserts && next.updates === last.updates) return next;
    last = next;
  }
  return last;
}

/** Requests the rate limiter let through (everything but 401, 403 and 429). */
export function admittedRequests(stats: SandboxStats): number {
  const refused = (stats.byStatus["401"] ?? 0) + (stats.byStatus["403"] ?? 0) + (stats.byStatus["429"] ?? 0);
  return stats.requests - refused;
}

/** Waits for the finished run's automatic verification (on a worker) to be stored. */
export async function untilVerified(sql: Database["sql"], runId: string): Promise<void> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const [r] = await sql<{ status: string }[]>`
      select status from drover.verification_requests where run_id = ${runId}::uuid`;
    if (r?.status === "done") return;
    if (Date.now() > deadline) throw new Error(`run ${runId} was not verified within 10 minutes`);
    await sleep(50);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
