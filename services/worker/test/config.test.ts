import { generateSecretKey } from "@drover/auth";
import { describe, expect, it } from "vitest";
import { loadWorkerConfig } from "../src/config.js";

describe("worker configuration", () => {
  it("requires the worker token, and says where one comes from", () => {
    expect(() => loadWorkerConfig({})).toThrow(/DROVER_WORKER_TOKEN: required: a worker-scoped token/);
    expect(() => loadWorkerConfig({ DROVER_WORKER_TOKEN: "a b" })).toThrow(/without spaces/);
    expect(loadWorkerConfig({ DROVER_WORKER_TOKEN: " drv_abc\n" }).token).toBe("drv_abc");
  });

  it("names a malformed secret key or TLS setting without quoting key material", () => {
    const material = generateSecretKey("k").split(":")[1]!;
    let message = "";
    try {
      loadWorkerConfig({
        DROVER_WORKER_TOKEN: "drv_abc",
        DROVER_SECRET_KEYS: `k:${material.slice(0, 30)}`,
        DROVER_TLS_CLIENT_CERT_FILE: "/nonexistent/client.pem",
      });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/DROVER_SECRET_KEYS: entry 1 \(key "k"\): the key must be 32 random bytes/);
    expect(message).toMatch(/DROVER_TLS_CLIENT_CERT_FILE and DROVER_TLS_CLIENT_KEY_FILE go together/);
    expect(message).not.toContain(material.slice(0, 30));
    expect(() => loadWorkerConfig({ DROVER_WORKER_TOKEN: "drv_abc", NODE_ENV: "production" })).toThrow(
      /DROVER_SECRET_KEYS: required when NODE_ENV=production/,
    );
  });

  it("derives the touch interval from the reaper's stale threshold, and refuses one it does not cover three times", () => {
    const base = { DROVER_WORKER_TOKEN: "drv_abc" };
    expect(loadWorkerConfig(base).taskTouchMs).toBe(15_000);
    expect(loadWorkerConfig({ ...base, DROVER_STALE_TASK_MS: "5000" }).taskTouchMs).toBe(833);
    expect(
      loadWorkerConfig({ ...base, DROVER_STALE_TASK_MS: "6000", DROVER_TASK_TOUCH_MS: "2000" }).taskTouchMs,
    ).toBe(2_000);
    expect(() =>
      loadWorkerConfig({ ...base, DROVER_STALE_TASK_MS: "5000", DROVER_TASK_TOUCH_MS: "15000" }),
    ).toThrow(/DROVER_STALE_TASK_MS \(5000\) must be at least 3× DROVER_TASK_TOUCH_MS \(15000\)/);
    expect(() =>
      loadWorkerConfig({ ...base, DROVER_STALE_TASK_MS: "6000", DROVER_TASK_TOUCH_MS: "2001" }),
    ).toThrow(/lower DROVER_TASK_TOUCH_MS to at most 2000/);
  });
});
