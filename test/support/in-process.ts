/**
 * An in-process Drover for service tests: a fresh database, a queue prefix of its own, the CRM
 * sandbox, one coordinator on a free port and as many workers as a test asks for. Real Postgres and
 * real NATS JetStream; nothing shared with another test file.
 */
import { randomBytes } from "node:crypto";
import { bearer, formatApiKey, generateSecretKey, issueApiKey, parseScopes } from "@drover/auth";
import { SHARED_SETTINGS } from "@drover/config";
import { type Coordinator, loadCoordinatorConfig, startCoordinator } from "@drover/coordinator";
import { type Sandbox, type SandboxOptions, startSandbox } from "@drover/crm-sandbox";
import { type Database, openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { type Client, createClient, type Run, RunService, RunStatus, timestampDate } from "@drover/proto";
import { taskQueueNames, webhookEventNames } from "@drover/task-queue";
import { createLogger, type Logger } from "@drover/telemetry";
import { loadWorkerConfig, startWorker, type Worker, type WorkerOptions } from "@drover/worker";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const LOG_LEVEL = (process.env.TEST_LOG_LEVEL ?? "error") as "error";

/** A small account: every run against it takes a few seconds. */
export const SMALL_ACCOUNT: SandboxOptions = {
  organizations: 60,
  persons: 120,
  deals: 80,
  leads: 30,
  activities: 100,
  notes: 90,
  mailPerDealMax: 3,
};

/** Small pages and two stripes, so even a small account is several tasks per kind. */
export const SETTINGS = { pageSize: "50", stripes: "2" };
export const API_TOKEN = `tok-${randomBytes(12).toString("hex")}`;

export interface ClusterOptions {
  sandbox?: SandboxOptions;
  workers?: number;
  /** Tasks per worker at once; the coordinator dispatches 2× this per run. */
  laneWidth?: number;
  /** Metadata for every call of `client`, e.g. the caller's trace context. */
  clientMetadata?: () => Record<string, string>;
  /** More API keys, by name: `{ acme: "tenant:acme" }` puts a token in `tokens.acme`. */
  apiKeys?: Record<string, string>;
  /** More coordinator configuration, e.g. { DROVER_API_KEYS_REFRESH_MS: "100" }. */
  coordinatorEnv?: Record<string, string>;
  /** Loggers of the coordinator and the workers (default: createLogger at TEST_LOG_LEVEL or "error"). */
  loggers?: { coordinator?: Logger; worker?: Logger };
}

/** What a worker's task attempt came to, as its onOutcome hook hears it. */
export type TaskOutcome = Parameters<NonNullable<WorkerOptions["onOutcome"]>>[0];

export interface Cluster {
  testDb: TestDatabase;
  /** A pool of the test's own, for assertions and fixtures. */
  database: Database;
  prefix: string;
  sandbox: Sandbox;
  coordinator: Coordinator;
  /** Authenticated with `tokens.admin`. */
  client: Client<typeof RunService>;
  /** Bearer tokens: `admin`, `worker`, and one per `apiKeys` entry. */
  tokens: Record<string, string>;
  /** DROVER_SECRET_KEYS of this cluster's coordinator and workers. */
  secretKeys: string;
  /** A RunService client sending `token` (none: no credential at all); closed with the cluster. */
  clientWith(token: string | undefined): Client<typeof RunService>;
  workers: Worker[];
  /** The outcomes of the tasks `worker` ran, newest last. */
  outcomesOf(worker: Worker): readonly TaskOutcome[];
  addWorker(): Promise<Worker>;
  /** Starts a crm run against the sandbox with the test settings. */
  start(tenantId: string, kinds?: string[], account?: string): Promise<Run>;
  close(): Promise<void>;
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const laneWidth = String(options.laneWidth ?? 2);
  const testDb = await createTestDatabase();
  const database = openDatabase(testDb.url, { max: 4 });
  const prefix = `t${randomBytes(5).toString("hex")}`;
  const sandbox = await startSandbox({ ...SMALL_ACCOUNT, ...options.sandbox });
  // Authentication is on, as in production: keys of the cluster's own, hashes in DROVER_API_KEYS.
  const issued = Object.entries({ admin: "admin", worker: "worker", ...options.apiKeys }).map(
    ([name, scopes]) => ({
      name,
      ...issueApiKey(parseScopes(scopes), `${name}-key`),
    }),
  );
  const tokens = Object.fromEntries(issued.map((k) => [k.name, k.token]));
  const secretKeys = generateSecretKey("test");
  const coordinator = await startCoordinator(
    loadCoordinatorConfig({
      DATABASE_URL: testDb.url,
      NATS_URL,
      DROVER_GRPC_ADDRESS: "127.0.0.1:0",
      DROVER_LANE_WIDTH: laneWidth,
      DROVER_QUEUE_PREFIX: prefix,
      DROVER_SWEEP_INTERVAL_MS: "300",
      DROVER_SHUTDOWN_GRACE_MS: "1000",
      DROVER_API_KEYS: issued.map((k) => formatApiKey(k.key)).join(","),
      DROVER_SECRET_KEYS: secretKeys,
      ...options.coordinatorEnv,
    }),
    { logger: options.loggers?.coordinator ?? createLogger("coordinator", { level: LOG_LEVEL }) },
  );
  const clients: Client<typeof RunService>[] = [];
  const clientWith = (token: string | undefined) => {
    const c = createClient(RunService, coordinator.address, {
      metadata: () => ({ ...(token === undefined ? {} : bearer(token)), ...options.clientMetadata?.() }),
    });
    clients.push(c);
    return c;
  };
  const client = clientWith(tokens.admin);
  const workers: Worker[] = [];
  const outcomes = new Map<Worker, TaskOutcome[]>();
  const addWorker = async () => {
    const seen: TaskOutcome[] = [];
    const worker = await startWorker(
      loadWorkerConfig({
        DATABASE_URL: testDb.url,
        NATS_URL,
        DROVER_COORDINATOR_ADDRESS: coordinator.address,
        DROVER_LANE_WIDTH: laneWidth,
        DROVER_QUEUE_PREFIX: prefix,
        DROVER_WORKER_ID: `${prefix}-w${workers.length}`,
        DROVER_SHUTDOWN_GRACE_MS: "5000",
        DROVER_WORKER_TOKEN: tokens.worker,
        DROVER_SECRET_KEYS: secretKeys,
        // Whatever the coordinator was given of the settings a worker must share, the workers get too.
        ...Object.fromEntries(
          Object.entries(options.coordinatorEnv ?? {}).filter(([name]) => name in SHARED_SETTINGS),
        ),
      }),
      {
        logger: options.loggers?.worker ?? createLogger("worker", { level: LOG_LEVEL }),
        onOutcome: (outcome) => seen.push(outcome),
      },
    );
    workers.push(worker);
    outcomes.set(worker, seen);
    return worker;
  };
  for (let i = 0; i < (options.workers ?? 0); i++) await addWorker();

  return {
    testDb,
    database,
    prefix,
    sandbox,
    coordinator,
    client,
    tokens,
    secretKeys,
    clientWith,
    workers,
    outcomesOf: (worker) => outcomes.get(worker) ?? [],
    addWorker,
    async start(tenantId, kinds = [], account = "acct") {
      const { run } = await client.startRun({
        tenantId,
        source: "crm",
        sourceAccount: account,
        kinds,
        sourceConfig: { baseUrl: sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
      });
      return run!;
    },
    async close() {
      await Promise.allSettled(workers.map((w) => w.stop()));
      await coordinator.stop();
      for (const c of clients) c.close();
      const nc = await connect({ servers: NATS_URL });
      try {
        const jsm = await jetstreamManager(nc);
        await jsm.streams.delete(taskQueueNames(prefix).stream).catch(() => false);
        // Every coordinator makes the webhook event stream (follow-events.ts) too.
        await jsm.streams.delete(webhookEventNames(prefix).stream).catch(() => false);
      } finally {
        await nc.close();
      }
      await database.close();
      await testDb.drop();
      await sandbox.close();
    },
  };
}

/** Polls `fn` until it returns something truthy, and returns that; fails with `what` after timeoutMs. */
export async function until<T>(
  fn: () => Promise<T> | T,
  timeoutMs = 20_000,
  what = "condition",
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await fn();
    if (last) return last as NonNullable<T>;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const TERMINAL: readonly RunStatus[] = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.STOPPED];

/** Waits until the run reaches a terminal status and returns it. */
export async function untilFinished(cluster: Cluster, runId: string, timeoutMs = 40_000): Promise<Run> {
  return until(
    async () => {
      const { run } = await cluster.client.getRun({ runId });
      return TERMINAL.includes(run!.status) ? run! : undefined;
    },
    timeoutMs,
    `run ${runId} to finish`,
  );
}

/** Waits for the automatic verification of the run's latest finish (one verified at or after `after`). */
export async function untilVerifiedAfter(cluster: Cluster, runId: string, after: Date): Promise<Run> {
  return until(
    async () => {
      const { run } = await cluster.client.getRun({ runId });
      const at = run!.verification?.verifiedAt;
      return at && timestampDate(at).getTime() >= after.getTime() ? run! : undefined;
    },
    60_000,
    `run ${runId} to be verified`,
  );
}

/** The error a promise rejected with (fails if it resolved). */
export async function rejection(
  promise: Promise<unknown>,
): Promise<Error & { code?: number; details?: Record<string, string> }> {
  try {
    await promise;
  } catch (err) {
    return err as Error & { code?: number };
  }
  throw new Error("expected the call to fail, but it succeeded");
}
