import { droverVitestConfig } from "../vitest.shared.ts";

// Only the end-to-end suite runs in `pnpm test`; chaos and benchmarks have their own commands.
export default droverVitestConfig("@drover/system-tests", {
  include: ["integration/**/*.test.ts", "e2e/**/*.test.ts"],
  testTimeout: 240_000,
  hookTimeout: 120_000,
});
