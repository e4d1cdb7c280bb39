import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bearer, channelCredentials, formatApiKey, generateSecretKey, issueApiKey } from "@drover/auth";
import { type Coordinator, loadCoordinatorConfig, startCoordinator } from "@drover/coordinator";
import { startSandbox } from "@drover/crm-sandbox";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import {
  Code,
  createClient,
  Health,
  HealthCheckResponse_ServingStatus,
  RunService,
  RunStatus,
  WorkerService,
} from "@drover/proto";
import { taskQueueNames } from "@drover/task-queue";
import { createLogger } from "@drover/telemetry";
import { loadWorkerConfig, startWorker } from "@drover/worker";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { rejection, until } from "../support/in-process.js";

const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const logger = () => createLogger("coordinator", { level: "silent" });

let testDb: TestDatabase;
const prefixes: string[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
const lastCleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  testDb = await createTestDatabase();
});
// Each test's coordinators stop with it: one left running keeps the leader lease, and a later
// test's coordinator would forward its workers' budget leases to it (another queue, no TLS).
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});
afterAll(async () => {
  for (const cleanup of lastCleanups) await cleanup().catch(() => {});
  const nc = await connect({ servers: NATS_URL });
  const jsm = await jetstreamManager(nc);
  for (const p of prefixes) await jsm.streams.delete(taskQueueNames(p).stream).catch(() => false);
  await nc.close();
  await testDb?.drop();
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  const prefix = `sec${randomBytes(4).toString("hex")}`;
  prefixes.push(prefix);
  return {
    DATABASE_URL: testDb.url,
    NATS_URL,
    DROVER_GRPC_ADDRESS: "127.0.0.1:0",
    DROVER_QUEUE_PREFIX: prefix,
    DROVER_SHUTDOWN_GRACE_MS: "500",
    DROVER_SECRET_KEYS: generateSecretKey("sec"),
    ...extra,
  };
}

async function start(config: Record<string, string>, options = {}): Promise<Coordinator> {
  const coordinator = await startCoordinator(loadCoordinatorConfig(config), { logger: logger(), ...options });
  cleanups.push(() => coordinator.stop());
  return coordinator;
}

describe("development keys", { timeout: 60_000 }, () => {
  it("are generated at the first start without keys, printed once as a JSON line, and only their hashes stored", async () => {
    const printed: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: unknown, ...rest: unknown[]) => {
      printed.push(String(chunk));
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stdout.write;
    let first: Coordinator;
    try {
      first = await start(env());
    } finally {
      process.stdout.write = write;
    }
    const line = printed.find((p) => p.includes('"dev-keys"'));
    expect(line).toBeDefined();
    const keys = JSON.parse(line!) as { event: string; admin: string; worker: string };
    expect(keys).toEqual({
      event: "dev-keys",
      admin: expect.stringMatching(/^drv_/),
      worker: expect.stringMatching(/^drv_/),
    });

    const database = openDatabase(testDb.url, { max: 1 });
    try {
      const rows = await database.sql<{ key_id: string; token_hash: string; scopes: string[] }[]>`
        select key_id, token_hash, scopes from drover.api_keys order by key_id`;
      expect(rows.map((r) => [r.key_id, r.scopes])).toEqual([
        ["dev-admin", ["admin"]],
        ["dev-worker", ["worker"]],
      ]);
      expect(JSON.stringify(rows)).not.toContain(keys.admin);
      expect(JSON.stringify(rows)).not.toContain(keys.worker);
      // Issued by no key, so the audit trail names the start that did it.
      const audited = await database.sql<
        { action: string; actor: string; details: Record<string, string> }[]
      >`
        select action, actor, details from drover.audit_events order by id`;
      expect(audited.map((r) => [r.action, r.details.key_id, r.details.scopes])).toEqual([
        ["IssueApiKey", "dev-admin", "admin"],
        ["IssueApiKey", "dev-worker", "worker"],
      ]);
      expect(audited[0]!.actor).toMatch(/^coordinator first start \(.+@.+\)$/);
    } finally {
      await database.close();
    }

    const admin = createClient(RunService, first!.address, { metadata: () => bearer(keys.admin) });
    const asWorker = createClient(RunService, first!.address, { metadata: () => bearer(keys.worker) });
    const workers = createClient(WorkerService, first!.address, { metadata: () => bearer(keys.worker) });
    try {
      await expect(admin.listRuns({})).resolves.toBeDefined();
      expect((await rejection(asWorker.listRuns({}))).code).toBe(Code.PERMISSION_DENIED);
      // Past authentication and scopes, the handler itself answers: there is no such task in that run.
      const unknownTask = await rejection(
        workers.taskFinished({ runId: crypto.randomUUID(), taskId: "1", outcome: "succeeded" }),
      );
      expect(unknownTask.code).toBe(Code.NOT_FOUND);
    } finally {
      admin.close();
      asWorker.close();
      workers.close();
    }

    // A second replica (or a restart) on the same database generates nothing; the keys still work.
    let again: unknown;
    const second = await start(env(), { onDevKeys: (k: unknown) => (again = k) });
    expect(again).toBeUndefined();
    const viaSecond = createClient(RunService, second.address, { metadata: () => bearer(keys.admin) });
    try {
      await expect(viaSecond.listRuns({})).resolves.toBeDefined();
    } finally {
      viaSecond.close();
    }
  });

  it("are refused in production: no keys configured or stored there fails the start", async () => {
    const fresh = await createTestDatabase();
    cleanups.push(() => fresh.drop());
    await expect(start({ ...env(), DATABASE_URL: fresh.url, NODE_ENV: "production" })).rejects.toThrow(
      /no API keys: set DROVER_API_KEYS/,
    );
  });
});

/** A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
function makeCertificates(): Record<
  "ca" | "serverCert" | "serverKey" | "clientCert" | "clientKey" | "otherCa",
  string
> {
  const dir = mkdtempSync(join(tmpdir(), "drover-tls-"));
  // The certificates serve every test of the file: removed after the last.
  lastCleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  const path = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  for (const ca of ["ca", "other-ca"]) {
    ssl(
      "req",
      "-x509",
      ...ec,
      "-keyout",
      path(`${ca}.key`),
      "-out",
      path(`${ca}.crt`),
      "-days",
      "1",
      "-subj",
      `/CN=drover-test-${ca}`,
    );
  }
  const leaf = (name: string, ext: string) => {
    writeFileSync(path(`${name}.ext`), ext);
    ssl("req", ...ec, "-keyout", path(`${name}.key`), "-out", path(`${name}.csr`), "-subj", `/CN=${name}`);
    ssl(
      "x509",
      "-req",
      "-in",
      path(`${name}.csr`),
      "-CA",
      path("ca.crt"),
      "-CAkey",
      path("ca.key"),
      "-CAcreateserial",
      "-out",
      path(`${name}.crt`),
      "-days",
      "1",
      "-extfile",
      path(`${name}.ext`),
    );
  };
  leaf("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n");
  leaf("client", "extendedKeyUsage=clientAuth\n");
  return {
    ca: path("ca.crt"),
    otherCa: path("other-ca.crt"),
    serverCert: path("server.crt"),
    serverKey: path("server.key"),
    clientCert: path("client.crt"),
    clientKey: path("client.key"),
  };
}

let opensslAvailable = true;
try {
  execFileSync("openssl", ["version"], { stdio: "pipe" });
} catch {
  opensslAvailable = false;
}

describe.skipIf(!opensslAvailable)("TLS", { timeout: 90_000 }, () => {
  const admin = issueApiKey([{ kind: "admin" }], "tls-admin");
  const worker = issueApiKey([{ kind: "worker" }], "tls-worker");
  const keys = [admin.key, worker.key].map(formatApiKey).join(",");
  let certs: ReturnType<typeof makeCertificates>;
  beforeAll(() => {
    certs = makeCertificates();
  });

  const healthy = async (
    address: string,
    credentials: Parameters<typeof channelCredentials>[0] | "insecure",
  ) => {
    const health = createClient(Health, address, {
      ...(credentials === "insecure" ? {} : { credentials: channelCredentials(credentials) }),
    });
    try {
      const { status } = await health.check({ service: "" }, { deadline: new Date(Date.now() + 3_000) });
      return status === HealthCheckResponse_ServingStatus.SERVING;
    } catch (err) {
      return (err as { code?: number }).code;
    } finally {
      health.close();
    }
  };

  it("serves TLS when a certificate is configured; a plaintext client cannot talk to it", async () => {
    const c = await start(
      env({
        DROVER_API_KEYS: keys,
        DROVER_TLS_CERT_FILE: certs.serverCert,
        DROVER_TLS_KEY_FILE: certs.serverKey,
      }),
    );
    expect(await healthy(c.address, { caFile: certs.ca })).toBe(true);
    expect(await healthy(c.address, "insecure")).toBe(Code.UNAVAILABLE);
    expect(await healthy(c.address, { caFile: certs.otherCa })).toBe(Code.UNAVAILABLE);
    // TLS says which machine; the bearer token is still required on top.
    const anonymous = createClient(RunService, c.address, {
      credentials: channelCredentials({ caFile: certs.ca }),
    });
    const authed = createClient(RunService, c.address, {
      credentials: channelCredentials({ caFile: certs.ca }),
      metadata: () => bearer(admin.token),
    });
    try {
      expect((await rejection(anonymous.listRuns({}))).code).toBe(Code.UNAUTHENTICATED);
      await expect(authed.listRuns({})).resolves.toBeDefined();
    } finally {
      anonymous.close();
      authed.close();
    }
  });

  it("with a client CA requires client certificates (mutual TLS), and a worker runs a migration through it", async () => {
    const coordinatorEnv = env({
      DROVER_API_KEYS: keys,
      DROVER_TLS_CERT_FILE: certs.serverCert,
      DROVER_TLS_KEY_FILE: certs.serverKey,
      DROVER_TLS_CLIENT_CA_FILE: certs.ca,
      DROVER_SWEEP_INTERVAL_MS: "300",
      DROVER_LANE_WIDTH: "2",
    });
    const c = await start(coordinatorEnv);
    expect(await healthy(c.address, { caFile: certs.ca })).not.toBe(true);
    expect(
      await healthy(c.address, { caFile: certs.ca, certFile: certs.clientCert, keyFile: certs.clientKey }),
    ).toBe(true);

    const sandbox = await startSandbox({
      organizations: 40,
      persons: 0,
      deals: 0,
      leads: 0,
      activities: 0,
      notes: 0,
    });
    cleanups.push(() => sandbox.close());
    const w = await startWorker(
      loadWorkerConfig({
        DATABASE_URL: testDb.url,
        NATS_URL,
        DROVER_COORDINATOR_ADDRESS: c.address,
        DROVER_QUEUE_PREFIX: coordinatorEnv.DROVER_QUEUE_PREFIX,
        DROVER_LANE_WIDTH: "2",
        DROVER_WORKER_ID: "tls-worker",
        DROVER_WORKER_TOKEN: worker.token,
        DROVER_SECRET_KEYS: coordinatorEnv.DROVER_SECRET_KEYS,
        DROVER_TLS_CA_FILE: certs.ca,
        DROVER_TLS_CLIENT_CERT_FILE: certs.clientCert,
        DROVER_TLS_CLIENT_KEY_FILE: certs.clientKey,
      }),
      { logger: createLogger("worker", { level: "silent" }) },
    );
    cleanups.push(() => w.stop());
    const client = createClient(RunService, c.address, {
      credentials: channelCredentials({
        caFile: certs.ca,
        certFile: certs.clientCert,
        keyFile: certs.clientKey,
      }),
      metadata: () => bearer(admin.token),
    });
    cleanups.push(async () => client.close());
    const { run } = await client.startRun({
      tenantId: "tls-tenant",
      source: "crm",
      sourceAccount: "acct",
      kinds: ["organizations"],
      sourceConfig: { baseUrl: sandbox.url, apiToken: "tls-token", settings: { pageSize: "20" } },
    });
    const done = await until(async () => {
      const { run: r } = await client.getRun({ runId: run!.id });
      return [RunStatus.SUCCEEDED, RunStatus.FAILED].includes(r!.status) ? r : undefined;
    }, 40_000);
    expect(done!.status, done!.error).toBe(RunStatus.SUCCEEDED);
    expect(done!.progress[0]!.imported).toBe(40n);
  });
});
