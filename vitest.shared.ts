import { join } from "node:path";
import { defineConfig, type ViteUserConfig } from "vitest/config";

/**
 * The one vitest configuration every package extends: workspace packages resolve to their
 * TypeScript source, and when DROVER_VITEST_JSON_DIR is set (CI) each package also writes a JSON
 * report there, from which .ci/run prints its closing "N passed, N failed" line.
 */
export function droverVitestConfig(
  packageName: string,
  test: NonNullable<ViteUserConfig["test"]> = {},
): ViteUserConfig {
  const jsonDir = process.env.DROVER_VITEST_JSON_DIR;
  return defineConfig({
    resolve: { conditions: ["@drover/source"] },
    ssr: { resolve: { conditions: ["@drover/source"] } },
    test: {
      include: ["test/**/*.test.ts"],
      testTimeout: 30_000,
      hookTimeout: 60_000,
      ...(jsonDir
        ? {
            reporters: ["default", "json"],
            outputFile: { json: join(jsonDir, `${packageName.replace(/[^a-z0-9-]/gi, "_")}.json`) },
          }
        : {}),
      ...test,
    },
  });
}
