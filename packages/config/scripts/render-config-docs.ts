import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONFIG_DOCS_PATH, REPO_ROOT, renderConfigDocs } from "./config-docs.js";

/**
 * `pnpm docs:config` writes docs/configuration.md from the services' config schemas; with `--check`
 * it writes nothing and exits 1 when the file differs from what it would write (CI runs this, so
 * the reference never drifts from what the services parse).
 */
const check = process.argv.slice(2).includes("--check");
const target = join(REPO_ROOT, CONFIG_DOCS_PATH);
const text = renderConfigDocs();
const current = existsSync(target) ? readFileSync(target, "utf8") : undefined;
if (current === text) {
  process.stdout.write(`${CONFIG_DOCS_PATH} is what the schemas render\n`);
} else if (check) {
  process.stderr.write(
    `${CONFIG_DOCS_PATH} differs from what the config schemas render: run pnpm docs:config and commit the result\n`,
  );
  process.exit(1);
} else {
  writeFileSync(target, text);
  process.stdout.write(`wrote ${CONFIG_DOCS_PATH}\n`);
}
