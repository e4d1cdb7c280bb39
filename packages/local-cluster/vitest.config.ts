import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { conditions: ["@drover/source"] },
  ssr: { resolve: { conditions: ["@drover/source"] } },
  test: { include: ["test/**/*.test.ts"], testTimeout: 30_000, hookTimeout: 60_000 },
});
