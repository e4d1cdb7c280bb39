import { droverVitestConfig } from "../../vitest.shared.ts";

// `pnpm test:model`: the generated sequences alone, as many as DROVER_MODEL_RUNS asks (model/cli.mjs).
export default droverVitestConfig("@drover/system-tests", {
  include: ["model/**/*.test.ts"],
  testTimeout: 0,
  hookTimeout: 120_000,
});
