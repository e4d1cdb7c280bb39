// Sums vitest JSON reports in a directory and prints CI's closing line: "N passed, N failed".
// Exits 1 when anything failed or nothing ran.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
let passed = 0;
let failed = 0;
let files = 0;
for (const name of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
  const report = JSON.parse(readFileSync(join(dir, name), "utf8"));
  files++;
  passed += report.numPassedTests ?? 0;
  failed += report.numFailedTests ?? 0;
  // A test file that failed to load has no failed tests but did fail.
  const brokenFiles = (report.testResults ?? []).filter(
    (r) => r.status === "failed" && (r.assertionResults ?? []).length === 0,
  ).length;
  failed += brokenFiles;
}
console.log(`${files} report(s)`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
