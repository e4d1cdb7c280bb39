import { afterEach, describe, expect, it } from "vitest";
import {
  Code,
  createHealthService,
  Health,
  isRpcError,
  HealthCheckResponse_ServingStatus as S,
} from "../src/index.js";
import { type Harness, serve, sleep } from "./harness.js";

let harness: Harness<typeof Health> | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

describe("health service", () => {
  it("answers Check and List, with NOT_FOUND for an unknown service", async () => {
    const health = createHealthService();
    health.setStatus("drover.v1.RunService", "SERVING");
    harness = await serve(Health, health.implementation);

    expect((await harness.client.check({})).status).toBe(S.SERVING);
    expect((await harness.client.check({ service: "drover.v1.RunService" })).status).toBe(S.SERVING);
    health.setStatus("drover.v1.RunService", "NOT_SERVING");
    expect((await harness.client.check({ service: "drover.v1.RunService" })).status).toBe(S.NOT_SERVING);

    const err = await harness.client.check({ service: "nope.Service" }).catch((e: unknown) => e);
    expect(isRpcError(err, Code.NOT_FOUND)).toBe(true);

    const list = await harness.client.list({});
    expect(Object.fromEntries(Object.entries(list.statuses).map(([k, v]) => [k, v.status]))).toEqual({
      "": S.SERVING,
      "drover.v1.RunService": S.NOT_SERVING,
    });
  });

  it("streams Watch: the current status, then each change, SERVICE_UNKNOWN until known", async () => {
    const health = createHealthService();
    harness = await serve(Health, health.implementation);

    const seen: S[] = [];
    for await (const update of harness.client.watch({ service: "drover.v1.WorkerService" })) {
      seen.push(update.status);
      if (seen.length === 1) health.setStatus("drover.v1.WorkerService", "SERVING");
      if (seen.length === 2) {
        // Neither a repeat of the same status nor another service's change may send anything.
        health.setStatus("drover.v1.WorkerService", "SERVING");
        health.setStatus("other.Service", "NOT_SERVING");
        await sleep(50);
        health.setStatus("drover.v1.WorkerService", "NOT_SERVING");
      }
      if (seen.length === 3) break;
    }
    expect(seen).toEqual([S.SERVICE_UNKNOWN, S.SERVING, S.NOT_SERVING]);
  });
});
