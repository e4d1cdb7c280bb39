import { leaderAddress } from "@drover/db";
import { afterAll, expect, it } from "vitest";
import { type Cluster, startCluster, until } from "../support/in-process.js";

let cluster: Cluster | undefined;
afterAll(async () => {
  await cluster?.close();
});

it("a coordinator started where the lease is free leads from its start, not a reaper interval later", async () => {
  // A reaper pass a minute apart: leading only at the first pass would leave runs started
  // meanwhile without a budget keeper or a reaper for that minute.
  cluster = await startCluster({
    workers: 0,
    coordinatorEnv: { DROVER_REAPER_INTERVAL_MS: "60000", DROVER_LEADER_TIMEOUT_MS: "180000" },
  });
  const started = Date.now();
  await until(() => cluster!.coordinator.isLeader(), 5_000);
  expect(Date.now() - started).toBeLessThan(5_000);
  // And it announced itself where workers look for the leader.
  expect(await leaderAddress(cluster.database.db)).toBe(cluster.coordinator.address);
});
