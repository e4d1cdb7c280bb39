import { describe, expect, it } from "vitest";
import { runFrom, spawnService } from "../src/index.js";

describe("where a service starts from", () => {
  it("is the source through tsx unless DROVER_CLUSTER_RUN_FROM says build", () => {
    expect(runFrom({})).toBe("source");
    expect(runFrom({ DROVER_CLUSTER_RUN_FROM: "build" })).toBe("build");
  });

  it("refuses any other value, naming the variable", () => {
    expect(() => runFrom({ DROVER_CLUSTER_RUN_FROM: "dist" })).toThrow(
      /DROVER_CLUSTER_RUN_FROM must be source or build/,
    );
  });

  it("says to build first when a service's build is missing, instead of starting nothing", async () => {
    await expect(
      spawnService({
        name: "missing",
        entry: "services/no-such-service/src/main.ts",
        readyEvent: "listening",
        logDir: "/tmp/drover-run-from-test",
        runFrom: "build",
      }),
    ).rejects.toThrow(/no-such-service\/dist\/main\.js is missing: run pnpm build first/);
  });
});
