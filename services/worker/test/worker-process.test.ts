import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { taskQueueNames } from "@drover/task-queue";
import { jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/** The worker as a process: what its exit code tells a process manager. */
const MAIN = fileURLToPath(new URL("../src/main.ts", import.meta.url));
const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";

let testDb: TestDatabase;
let nc: NatsConnection;
const streams: string[] = [];
beforeAll(async () => {
  testDb = await createTestDatabase();
  nc = await connect({ servers: NATS_URL });
});
afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for (const s of streams) await jsm.streams.delete(s).catch(() => false);
  await nc.drain();
  await testDb.drop();
});

interface WorkerProcess {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  /** Resolves when the worker printed its ready line. */
  ready: Promise<void>;
}

function spawnWorker(env: Record<string, string>): WorkerProcess {
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=@drover/source", MAIN], {
    env: {
      ...process.env,
      DATABASE_URL: testDb.url,
      NATS_URL,
      DROVER_COORDINATOR_ADDRESS: "127.0.0.1:1",
      DROVER_WORKER_TOKEN: "worker-token",
      DROVER_METRICS_PORT: "off",
      DROVER_SHUTDOWN_GRACE_MS: "500",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let onReady!: () => void;
  const ready = new Promise<void>((r) => {
    onReady = r;
  });
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.includes('"event":"pulling"')) onReady();
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exited, ready };
}

/** Fails the test instead of hanging it when the process does not end. */
async function exitCode(p: WorkerProcess, timeoutMs = 30_000): Promise<number | null> {
  const timer = setTimeout(() => p.child.kill("SIGKILL"), timeoutMs);
  const code = await p.exited;
  clearTimeout(timer);
  return code;
}

describe("the worker process", { timeout: 60_000 }, () => {
  it("refuses at start, with exit code 2, a touch interval the reaper's stale threshold does not comfortably cover", async () => {
    const p = spawnWorker({
      DROVER_QUEUE_PREFIX: `t${randomBytes(5).toString("hex")}`,
      DROVER_STALE_TASK_MS: "5000",
      DROVER_TASK_TOUCH_MS: "15000",
    });
    expect(await exitCode(p)).toBe(2);
    expect(p.output()).toMatch(
      /DROVER_STALE_TASK_MS \(5000\) must be at least 3× DROVER_TASK_TOUCH_MS \(15000\).*raise DROVER_STALE_TASK_MS to at least 45000.*lower DROVER_TASK_TOUCH_MS to at most 1666/,
    );
  });

  it("whose queue consumer cannot be re-created ends FAILED with a non-zero exit instead of retrying forever", async () => {
    const prefix = `t${randomBytes(5).toString("hex")}`;
    const names = taskQueueNames(prefix);
    streams.push(names.stream, `${prefix}_squatter`);
    const p = spawnWorker({ DROVER_QUEUE_PREFIX: prefix, DROVER_CONSUMER_RECOVERY_MS: "1000" });
    await Promise.race([p.ready, p.exited]);
    expect(p.output()).toContain('"event":"pulling"');

    // The queue goes, and another stream holds its subjects: ensureTaskQueue can never succeed again.
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(names.stream);
    await jsm.streams.add({
      name: `${prefix}_squatter`,
      subjects: [`${names.subjectPrefix}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.Memory,
    });

    const code = await exitCode(p);
    expect(code).not.toBe(0);
    expect(code).not.toBeNull();
    expect(p.output()).toMatch(/"to":"FAILED"/);
    expect(p.output()).toContain("drover worker failed");
  });
});
