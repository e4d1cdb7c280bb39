import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { renderDeployFiles } from "./deploy-manifests.js";
import { REPO_ROOT } from "./service-process.js";

/**
 * `pnpm deploy:render` writes deploy/'s generated files from the service specs; with `--check` it
 * writes nothing and exits 1 naming each file that differs from what it would write (CI runs this,
 * so the manifests never drift from what the tests start).
 */
const check = process.argv.slice(2).includes("--check");
const deployDir = join(REPO_ROOT, "deploy");
const stale: string[] = [];
for (const [path, text] of Object.entries(renderDeployFiles())) {
  const target = join(deployDir, path);
  const current = existsSync(target) ? readFileSync(target, "utf8") : undefined;
  if (current === text) continue;
  if (check) {
    stale.push(`deploy/${path}`);
    continue;
  }
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, text);
  process.stdout.write(`wrote deploy/${path}\n`);
}
if (stale.length > 0) {
  process.stderr.write(
    `deploy/ differs from what the service specs render: run pnpm deploy:render and commit the result\n  ${stale.join("\n  ")}\n`,
  );
  process.exit(1);
}
