import { randomBytes } from "node:crypto";
import { bearer } from "@drover/auth";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { type Cluster, type ClusterOptions, startCluster } from "@drover/local-cluster";
import { type Client, createClient, type Run, RunService, RunStatus } from "@drover/proto";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";

export const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";

export interface Harness {
  testDb: TestDatabase;
  database: ReturnType<typeof openDatabase>;
  cluster: Cluster;
  client: Client<typeof RunService>;
  queuePrefix: string;
  /**
   * What the sandbox says a perfect import holds, per kind. HubSpot's sandbox lists live and
   * archived (deleted) ids apart and serves nothing malformed: both count as the kind's rows here.
   */
  truth(): Promise<{ kinds: Record<string, { ids: string[]; malformed: string[]; orphans: string[] }> }>;
  close(): Promise<void>;
}

type HarnessTruth = Awaited<ReturnType<Harness["truth"]>>;

function hubspotTruth(body: { types: Record<string, { live: string[]; archived: string[] }> }): HarnessTruth {
  const kinds = Object.fromEntries(
    Object.entries(body.types).map(([type, ids]) => [
      type,
      { ids: [...ids.live, ...ids.archived], malformed: [], orphans: [] },
    ]),
  );
  return { kinds };
}

/** A fresh database, a private JetStream stream, and the services as separate processes. */
export async function openClusterHarness(
  options: Pick<
    ClusterOptions,
    "workers" | "laneWidth" | "sandbox" | "sandboxSource" | "env" | "coordinators" | "logDir" | "dashboard"
  > & {
    /** A NATS server of the test's own (the chaos suite restarts it); default NATS_URL. */
    natsUrl?: string;
    /** A PostgreSQL server of the test's own (the chaos suite restarts it); default DATABASE_URL's. */
    databaseBaseUrl?: string;
  },
): Promise<Harness> {
  const testDb = await createTestDatabase(options.databaseBaseUrl);
  const queuePrefix = `e2e-${randomBytes(4).toString("hex")}`;
  const cluster = await startCluster({ databaseUrl: testDb.url, natsUrl: NATS_URL, queuePrefix, ...options });
  const database = openDatabase(testDb.url, { max: 3 });
  const client = createClient(RunService, cluster.coordinatorAddresses[0]!, {
    metadata: () => bearer(cluster.adminToken),
  });
  return {
    testDb,
    database,
    cluster,
    client,
    queuePrefix,
    async truth() {
      const body = (await (await fetch(`${cluster.sandboxUrl}/__sandbox/truth`)).json()) as never;
      return options.sandboxSource === "hubspot" ? hubspotTruth(body) : body;
    },
    async close() {
      client.close();
      await cluster.stop();
      await database.close();
      const nc = await connect({ servers: (options.natsUrl ?? NATS_URL).split(",") });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(`${queuePrefix.toUpperCase().replace(/-/g, "_")}_TASKS`).catch(() => {});
      await nc.close();
      await testDb.drop();
    },
  };
}

/**
 * Follows WatchRun to the run's end and returns its last state. With `limit`, gives up after
 * `limit.ms` and fails with the run's last state and what `limit.explain` says (a stalled run's
 * locks and tasks), rather than leaving the test to time out without a word.
 */
export async function watchToEnd(
  client: Client<typeof RunService>,
  runId: string,
  limit?: { ms: number; explain?: () => Promise<string> },
): Promise<Run> {
  let last: Run | undefined;
  const signal = limit ? AbortSignal.timeout(limit.ms) : undefined;
  try {
    for await (const update of client.watchRun({ runId }, { signal })) last = update.run;
  } catch (err) {
    if (!signal?.aborted) throw err;
    const state = last
      ? `${RunStatus[last.status]}, phase ${last.currentPhase} of ${last.phases.length}`
      : "no update";
    const why = (await limit?.explain?.().catch((e: unknown) => `(explain failed: ${e})`)) ?? "";
    throw new Error(`run ${runId} not finished after ${limit!.ms} ms (last: ${state}) ${why}`);
  }
  return last!;
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
