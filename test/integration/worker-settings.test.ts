import { spawn } from "node:child_process";
import { type AddressInfo, createServer, connect as tcpConnect } from "node:net";
import { ConfigError } from "@drover/config";
import { createTestDatabase } from "@drover/db/testing";
import { REPO_ROOT } from "@drover/local-cluster";
import { taskQueueNames } from "@drover/task-queue";
import { createLogger } from "@drover/telemetry";
import { loadWorkerConfig, startWorker } from "@drover/worker";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster } from "../support/in-process.js";

const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
let c: Cluster;

beforeAll(async () => {
  // The harness's coordinator has lane width 2, the default attempts (8) and stale threshold (90 s).
  c = await startCluster({ workers: 1 });
});
afterAll(async () => {
  await c?.close();
});

/** A worker's environment that agrees with the cluster's coordinator, plus `extra`. */
const workerEnv = (extra: Record<string, string>) => ({
  DATABASE_URL: c.testDb.url,
  NATS_URL,
  DROVER_COORDINATOR_ADDRESS: c.coordinator.address,
  DROVER_LANE_WIDTH: "2",
  DROVER_QUEUE_PREFIX: c.prefix,
  DROVER_WORKER_TOKEN: c.tokens.worker!,
  DROVER_SECRET_KEYS: c.secretKeys,
  DROVER_METRICS_PORT: "off",
  ...extra,
});

describe("settings a worker shares with the coordinator", { timeout: 60_000 }, () => {
  it("let a worker with the coordinator's values start", () => {
    expect(c.workers[0]!.state).toBe("RUNNING");
  });

  it("refuse a worker whose queue prefix, attempts and stale threshold differ, naming both values, before it touches the queue", async () => {
    const prefix = `${c.prefix}other`;
    const err = await startWorker(
      loadWorkerConfig(
        workerEnv({ DROVER_QUEUE_PREFIX: prefix, DROVER_MAX_ATTEMPTS: "3", DROVER_STALE_TASK_MS: "60000" }),
      ),
      { logger: createLogger("worker", { level: "silent" }) },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([
      `DROVER_QUEUE_PREFIX: this worker has "${prefix}" but the coordinator "${c.prefix}"; set the same value on both`,
      "DROVER_MAX_ATTEMPTS: this worker has 3 but the coordinator 8; set the same value on both",
      "DROVER_STALE_TASK_MS: this worker has 60000 but the coordinator 90000; set the same value on both",
    ]);
    const nc = await connect({ servers: NATS_URL });
    try {
      const jsm = await jetstreamManager(nc);
      await expect(jsm.streams.info(taskQueueNames(prefix).stream)).rejects.toThrow();
    } finally {
      await nc.close();
    }
  });

  it("refuse a worker configured for another replica count than the task stream keeps, saying how to fix it", async () => {
    const err = await startWorker(loadWorkerConfig(workerEnv({ DROVER_STREAM_REPLICAS: "3" })), {
      logger: createLogger("worker", { level: "silent" }),
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const stream = taskQueueNames(c.prefix).stream;
    expect((err as ConfigError).problems).toEqual([
      `the task stream ${stream} keeps 1 replica(s) but DROVER_STREAM_REPLICAS is 3: set DROVER_STREAM_REPLICAS=1 on every coordinator and worker, or change the stream's replicas first (nats stream edit ${stream} --replicas 3)`,
    ]);
  });

  it("end the worker process with exit code 2 and a line naming the variable", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "--conditions=@drover/source", "services/worker/src/main.ts"],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, ...workerEnv({ DROVER_LANE_WIDTH: "3", LOG_LEVEL: "silent" }) },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk);
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    // A worker that started after all is ended here rather than outlive the test.
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const code = await exited.finally(() => clearTimeout(timer));
    expect(code, stderr).toBe(2);
    expect(stderr).toContain(
      "DROVER_LANE_WIDTH: this worker has 3 but the coordinator 2; set the same value on both",
    );
  });

  it("wait for a coordinator still starting when DROVER_COORDINATOR_WAIT_MS says so, and compare with it; without the wait the check is skipped", async () => {
    // A coordinator that is not listening yet: its address, taken now, answers 1.5 s later.
    const [host, port] = c.coordinator.address.split(":") as [string, string];
    const late = createServer((client) => {
      const upstream = tcpConnect(Number(port), host);
      client.pipe(upstream).pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on("error", end).on("close", end);
      upstream.on("error", end).on("close", end);
    });
    const free = createServer();
    await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
    const latePort = (free.address() as AddressInfo).port;
    await new Promise((resolve) => free.close(resolve));
    const listening = new Promise((resolve) => setTimeout(resolve, 1_500)).then(
      () => new Promise<void>((resolve) => late.listen(latePort, "127.0.0.1", resolve)),
    );
    // A first start: no coordinator has announced itself in this database yet, so a worker that
    // finds nothing at its address has no leader to turn to either.
    const firstStart = await createTestDatabase();
    const env = (wait: string) =>
      workerEnv({
        DATABASE_URL: firstStart.url,
        DROVER_COORDINATOR_ADDRESS: `127.0.0.1:${latePort}`,
        DROVER_COORDINATOR_WAIT_MS: wait,
        DROVER_MAX_ATTEMPTS: "3",
      });
    const logger = createLogger("worker", { level: "silent" });
    try {
      // Without the wait: nothing listens yet, so the worker starts unchecked (the gap this closes).
      const unchecked = await startWorker(loadWorkerConfig(env("0")), { logger });
      await unchecked.stop();
      const started = Date.now();
      const err = await startWorker(loadWorkerConfig(env("20000")), { logger }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toEqual([
        "DROVER_MAX_ATTEMPTS: this worker has 3 but the coordinator 8; set the same value on both",
      ]);
      await listening;
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      await listening;
      await new Promise((resolve) => late.close(resolve));
      await firstStart.drop();
    }
  });
});
