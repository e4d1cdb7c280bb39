import { droverVitestConfig } from "../vitest.shared.ts";

// The end-to-end and browser suites run in `pnpm test`; chaos and benchmarks have their own commands.
export default droverVitestConfig("@drover/system-tests", {
  include: ["integration/**/*.test.ts", "e2e/**/*.test.ts", "browser/**/*.test.ts"],
  testTimeout: 240_000,
  hookTimeout: 120_000,
});
