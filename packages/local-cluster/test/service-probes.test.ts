import { randomBytes } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { createClient, Health, HealthCheckResponse_ServingStatus } from "@drover/proto";
import { taskQueueNames, webhookEventNames } from "@drover/task-queue";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, EMPTY_CRM_SANDBOX, startCluster } from "../src/cluster.js";
import { type ServiceProcess, spawnService } from "../src/service-process.js";
import {
  COORDINATOR,
  DASHBOARD,
  RECEIVER,
  type ServiceProbe,
  type ServiceSpec,
  serviceEnv,
  servicePort,
  terminationGraceSeconds,
  WORKER,
} from "../src/service-spec.js";

/**
 * The probes the manifests declare, asked of real processes started by the local cluster from the
 * same specs: what passes here is what a kubelet will ask.
 */
const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const queuePrefix = `probes-${randomBytes(4).toString("hex")}`;
let testDb: TestDatabase;
let cluster: Cluster;

beforeAll(async () => {
  testDb = await createTestDatabase();
  cluster = await startCluster({
    databaseUrl: testDb.url,
    natsUrl: NATS_URL,
    queuePrefix,
    workers: 1,
    laneWidth: 2,
    sandbox: EMPTY_CRM_SANDBOX,
    dashboard: true,
  });
}, 120_000);

afterAll(async () => {
  await cluster?.stop();
  const nc = await connect({ servers: NATS_URL });
  try {
    await (await jetstreamManager(nc)).streams.delete(taskQueueNames(queuePrefix).stream).catch(() => {});
    await (await jetstreamManager(nc)).streams.delete(webhookEventNames(queuePrefix).stream).catch(() => {});
  } finally {
    await nc.close();
  }
  await testDb?.drop();
}, 120_000);

/** host:port of a named port of a started process, from the field its ready line names it in. */
function whereListens(spec: ServiceSpec, process: ServiceProcess, portName: ServiceProbe["port"]): string {
  const value = String(process.ready[servicePort(spec, portName).readyField]);
  return value.includes("://") ? new URL(value).host : value;
}

/** Asks the probe as a kubelet would: gRPC health of the whole server, or an HTTP GET answering 2xx/3xx. */
async function probe(spec: ServiceSpec, process: ServiceProcess, p: ServiceProbe): Promise<boolean> {
  const hostPort = whereListens(spec, process, p.port);
  if (p.kind === "http") {
    const res = await fetch(`http://${hostPort}${p.path}`);
    await res.body?.cancel();
    return res.status >= 200 && res.status < 400;
  }
  const client = createClient(Health, hostPort);
  try {
    const res = await client.check({ service: "" }, { deadline: new Date(Date.now() + 5_000) });
    return res.status === HealthCheckResponse_ServingStatus.SERVING;
  } finally {
    client.close();
  }
}

describe("the services started from their specs", () => {
  it("answer every readiness and liveness probe the manifests declare", async () => {
    const started: [ServiceSpec, ServiceProcess][] = [
      [COORDINATOR, cluster.coordinators[0]!],
      [WORKER, cluster.workers[0]!],
      [DASHBOARD, cluster.dashboard!],
    ];
    for (const [spec, process] of started) {
      for (const p of [spec.probes.readiness, spec.probes.liveness]) {
        expect(await probe(spec, process, p), `${spec.name} ${p.kind} probe on ${p.port}`).toBe(true);
      }
    }
  });

  it("the webhook receiver, started from its spec alone, answers its probes and stops in time", async () => {
    const receiver = await spawnService({
      name: "receiver",
      entry: RECEIVER.entry,
      env: serviceEnv(RECEIVER, {
        settings: { NATS_URL, DROVER_QUEUE_PREFIX: queuePrefix },
        secrets: { DATABASE_URL: testDb.url },
        links: {},
        host: "127.0.0.1",
        portNumber: () => 0,
      }),
      readyEvent: RECEIVER.readyEvent,
      logDir: cluster.logDir,
    });
    try {
      for (const p of [RECEIVER.probes.readiness, RECEIVER.probes.liveness])
        expect(await probe(RECEIVER, receiver, p), `receiver ${p.kind} probe on ${p.port}`).toBe(true);
    } finally {
      expect(await receiver.stop("SIGTERM", terminationGraceSeconds(RECEIVER) * 1000)).toBe(0);
    }
  }, 60_000);

  it("a worker asked to stop drains and exits within the time its pod is given", async () => {
    const worker = cluster.workers[0]!;
    // stop() SIGKILLs after the timeout, as the kubelet would: an exit code of 0 means it drained in time.
    expect(await worker.stop("SIGTERM", terminationGraceSeconds(WORKER) * 1000)).toBe(0);
  }, 60_000);
});
