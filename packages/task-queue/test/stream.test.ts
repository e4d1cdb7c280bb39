import { randomBytes } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureTaskQueue, TaskQueueConfigError, taskQueueNames } from "../src/index.js";

let nc: NatsConnection;
const made: string[] = [];
const fresh = () => {
  const names = taskQueueNames(`s${randomBytes(4).toString("hex")}`);
  made.push(names.stream);
  return names;
};

beforeAll(async () => {
  nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
});

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for (const stream of made) await jsm.streams.delete(stream).catch(() => {});
  await nc.drain();
});

describe("task stream replicas", () => {
  it("creates the stream with the replica count asked for, and confirms it on a second call", async () => {
    const jsm = await jetstreamManager(nc);
    const names = fresh();
    await ensureTaskQueue(jsm, names, { replicas: 1 });
    await ensureTaskQueue(jsm, names, { replicas: 1 });
    expect((await jsm.streams.info(names.stream)).config.num_replicas).toBe(1);
    expect((await jsm.consumers.info(names.stream, names.consumer)).config.durable_name).toBe(names.consumer);
  });

  it("refuses a process configured for another replica count than the stream keeps, and leaves the stream as it was", async () => {
    const jsm = await jetstreamManager(nc);
    const names = fresh();
    await ensureTaskQueue(jsm, names, { replicas: 1 });
    const refused = await ensureTaskQueue(jsm, names, { replicas: 3 }).catch((err: Error) => err);
    expect(refused).toBeInstanceOf(TaskQueueConfigError);
    expect((refused as Error).message).toContain(
      `the task stream ${names.stream} keeps 1 replica(s) but DROVER_STREAM_REPLICAS is 3: set DROVER_STREAM_REPLICAS=1`,
    );
    expect((await jsm.streams.info(names.stream)).config.num_replicas).toBe(1);
  });

  it("says a cluster is needed when a single server is asked for three replicas", async () => {
    const jsm = await jetstreamManager(nc);
    const names = fresh();
    const refused = await ensureTaskQueue(jsm, names, { replicas: 3 }).catch((err: Error) => err);
    expect(refused).toBeInstanceOf(TaskQueueConfigError);
    expect((refused as Error).message).toMatch(
      /cannot keep 3 replicas \(DROVER_STREAM_REPLICAS=3\): that needs a NATS cluster of at least 3 JetStream servers/,
    );
    expect(await jsm.streams.info(names.stream).catch(() => undefined)).toBeUndefined();
  });
});
