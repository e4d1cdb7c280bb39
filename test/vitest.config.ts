import { droverVitestConfig } from "../vitest.shared.ts";

// The end-to-end, browser and model-based suites run in `pnpm test`, and the bench's own
// arithmetic; chaos and benchmarks themselves have their own commands.
export default droverVitestConfig("@drover/system-tests", {
  include: [
    "integration/**/*.test.ts",
    "e2e/**/*.test.ts",
    "browser/**/*.test.ts",
    "model/**/*.test.ts",
    "bench/**/*.test.ts",
    "layout/**/*.test.ts",
  ],
  testTimeout: 240_000,
  hookTimeout: 120_000,
  // These run real processes (NATS nodes, coordinators, workers, Chromium) against real timing on
  // a two-core machine, where a loaded moment can miss a deadline that a quiet one meets by seconds.
  // A test that fails is run once more; one that passes only then is not hidden: CI's summary names
  // it with the first attempt's failure (.ci/summarize-vitest.mjs, "passed on retry").
  retry: 1,
});
