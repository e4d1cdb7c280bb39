import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnService } from "@drover/local-cluster";
import { describe, expect, it } from "vitest";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("a cluster's service process", () => {
  it("that never becomes ready is killed before the start rejects, so nothing outlives the failed start", async () => {
    const logDir = mkdtempSync(join(tmpdir(), "drover-never-ready-"));
    const start = spawnService({
      name: "never-ready",
      entry: "test/integration/fixtures/never-ready.ts",
      readyEvent: "listening",
      logDir,
      readyTimeoutMs: 3_000,
    });
    await expect(start).rejects.toThrow(/did not become ready within 3000 ms .*killed/);
    const started = JSON.parse(
      readFileSync(join(logDir, "never-ready.log"), "utf8").split("\n")[0] ?? "{}",
    ) as {
      pid?: number;
    };
    expect(started.pid).toBeGreaterThan(0);
    expect(alive(started.pid!)).toBe(false);
  });
});
