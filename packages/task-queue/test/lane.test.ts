import { randomBytes } from "node:crypto";
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ensureTaskQueue,
  parseAssignment,
  publishTask,
  startLane,
  type TaskAssignment,
  taskQueueNames,
} from "../src/index.js";

const names = taskQueueNames(`t${randomBytes(4).toString("hex")}`);
let nc: NatsConnection;

beforeAll(async () => {
  nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
  await ensureTaskQueue(await jetstreamManager(nc), names);
});

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(names.stream).catch(() => {});
  await nc.drain();
});

describe("task lane", () => {
  it("ensuring the queue twice from racing processes is harmless", async () => {
    const jsm = await jetstreamManager(nc);
    await Promise.all([ensureTaskQueue(jsm, names), ensureTaskQueue(jsm, names)]);
    expect((await jsm.streams.info(names.stream)).config.subjects).toEqual([`${names.subjectPrefix}.>`]);
  });

  it("runs every assignment once and never more than its width at a time", async () => {
    const js = jetstream(nc);
    for (let i = 1; i <= 12; i++)
      await publishTask(js, names, { taskId: i, runId: "r1" }, { traceparent: `tp-${i}` });

    const seen: number[] = [];
    const headersSeen: string[] = [];
    let concurrent = 0;
    let peak = 0;
    let done!: () => void;
    const all = new Promise<void>((r) => {
      done = r;
    });
    const lane = await startLane(js, names, {
      width: 3,
      async handle(msg) {
        concurrent++;
        peak = Math.max(peak, concurrent);
        const a = parseAssignment(msg.data) as TaskAssignment;
        headersSeen.push(msg.headers?.get("traceparent") ?? "");
        await new Promise((r) => setTimeout(r, 20));
        seen.push(a.taskId);
        concurrent--;
        msg.ack();
        if (seen.length === 12) done();
      },
    });
    await all;
    await lane.drain();
    expect([...seen].sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThan(1);
    expect(headersSeen).toContain("tp-7");
  });

  it("an idle lane stops without waiting out its pull, and the pull it dropped takes no task away", async () => {
    const own = taskQueueNames(`t${randomBytes(4).toString("hex")}`);
    await ensureTaskQueue(await jetstreamManager(nc), own);
    const js = jetstream(nc);
    const taken: string[] = [];
    const lane = (name: string) =>
      startLane(js, own, {
        width: 2,
        async handle(msg) {
          taken.push(`${name}:${(parseAssignment(msg.data) as TaskAssignment).taskId}`);
          msg.ack();
        },
      });
    const idle = await lane("idle");
    // Into its pull (1 s long) before it is told to stop.
    await new Promise((r) => setTimeout(r, 150));
    const t0 = performance.now();
    await idle.drain();
    const stopMs = performance.now() - t0;
    const other = await lane("other");
    try {
      await publishTask(js, own, { taskId: 7, runId: "r1" });
      // Had the stopped lane's pull still been served, this task would wait out ack_wait (30 s).
      const deadline = Date.now() + 5_000;
      while (taken.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(taken).toEqual(["other:7"]);
      expect(stopMs).toBeLessThan(600);
    } finally {
      await other.drain();
      await (await jetstreamManager(nc)).streams.delete(own.stream).catch(() => false);
    }
  });

  it("gives up, and says so, when its consumer cannot be re-created within recoverForMs", async () => {
    const lost = taskQueueNames(`t${randomBytes(4).toString("hex")}`);
    const jsm = await jetstreamManager(nc);
    await ensureTaskQueue(jsm, lost);
    const lane = await startLane(jetstream(nc), lost, {
      width: 2,
      recoverForMs: 700,
      ensure: () => ensureTaskQueue(jsm, lost),
      async handle(msg) {
        msg.ack();
      },
    });
    // The queue goes and another stream takes its subjects: ensureTaskQueue cannot succeed again.
    await jsm.streams.delete(lost.stream);
    const squatter = `${lost.stream}_SQUATTER`;
    await jsm.streams.add({
      name: squatter,
      subjects: [`${lost.subjectPrefix}.>`],
      retention: RetentionPolicy.Limits,
      storage: StorageType.Memory,
    });
    try {
      const err = await lane.failed;
      expect(err).toBeInstanceOf(Error);
      await lane.drain();
    } finally {
      await jsm.streams.delete(squatter).catch(() => false);
    }
  });

  it("a garbled assignment is recognised as such", () => {
    expect(parseAssignment(new TextEncoder().encode("{nope"))).toBeUndefined();
    expect(parseAssignment(new TextEncoder().encode('{"taskId":"1","runId":"r"}'))).toBeUndefined();
    expect(parseAssignment(new TextEncoder().encode('{"verifyRunId":"r; drop table"}'))).toBeUndefined();
  });

  it("tells a verification request from a task assignment", () => {
    const id = "0b6f3c1e-7d2a-4c55-9e1b-2f4a6c8d0e12";
    expect(parseAssignment(new TextEncoder().encode(JSON.stringify({ verifyRunId: id })))).toEqual({
      verifyRunId: id,
    });
    expect(parseAssignment(new TextEncoder().encode('{"taskId":4,"runId":"r"}'))).toEqual({
      taskId: 4,
      runId: "r",
    });
  });
});
