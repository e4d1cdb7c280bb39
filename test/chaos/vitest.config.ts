import { fileURLToPath } from "node:url";
import { droverVitestConfig } from "../../vitest.shared.ts";

// `pnpm test:chaos`: the full chaos run, apart from `pnpm test` (whose e2e suite has the small one).
export default droverVitestConfig("@drover/chaos", {
  root: fileURLToPath(new URL(".", import.meta.url)),
  include: ["**/*.test.ts"],
  // The scenario bounds itself to ~5 minutes (startup, a run of at most 3, verification, teardown).
  testTimeout: 330_000,
  hookTimeout: 60_000,
});
