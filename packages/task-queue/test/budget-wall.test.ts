import { randomBytes } from "node:crypto";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BudgetWall, parseBudgetWall, publishBudgetWall, taskQueueNames } from "../src/index.js";

const names = taskQueueNames(`w${randomBytes(4).toString("hex")}`);
let nc: NatsConnection;

beforeAll(async () => {
  nc = await connect({ servers: process.env.NATS_URL ?? "127.0.0.1:4222" });
});
afterAll(async () => {
  await nc.drain();
});

describe("the budget wall message", () => {
  it("reaches a subscriber of the prefix's wall subject as the wall that was published", async () => {
    const heard: (BudgetWall | undefined)[] = [];
    const arrived = new Promise<void>((resolve) => {
      nc.subscribe(names.budgetWallSubject, {
        max: 1,
        callback: (_err, msg) => {
          heard.push(parseBudgetWall(msg.data));
          resolve();
        },
      });
    });
    await nc.flush();
    const wall = { source: "crm", account: "acct-1", until: Date.now() + 2_000 };
    publishBudgetWall(nc, names, wall);
    await arrived;
    expect(heard).toEqual([wall]);
  });

  it("is not read from a message that lacks a field or is not JSON", () => {
    const encode = (v: unknown) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));
    expect(parseBudgetWall(encode({ account: "a", until: 1 }))).toBeUndefined();
    expect(parseBudgetWall(encode({ source: "crm", account: "a", until: "soon" }))).toBeUndefined();
    expect(parseBudgetWall(encode("not json"))).toBeUndefined();
  });
});
