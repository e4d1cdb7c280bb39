import { fileURLToPath } from "node:url";
import { droverVitestConfig } from "../../vitest.shared.ts";

// `pnpm test:chaos`: the full chaos run, apart from `pnpm test` (whose e2e suite has the small one).
export default droverVitestConfig("@drover/chaos", {
  root: fileURLToPath(new URL(".", import.meta.url)),
  include: ["**/*.test.ts"],
  // The scenario gives up on a run that stops moving for 90 s, and on any run after 15 minutes
  // (a backstop): startup, that, verification and teardown fit in 18.
  testTimeout: 1_080_000,
  hookTimeout: 60_000,
});
