// Sums the vitest JSON reports (vitest's "json" reporter) in a directory and prints CI's closing
// line, "N passed, N failed", as the last line of its output.
//
//   node .ci/summarize-vitest.mjs <dir> [--exit-code N]
//
// Each failing test is named with the first line of its error, and so is each test that passed only
// when retried (the system tests retry once: test/vitest.config.ts), which is not counted as failed.
//
// failed = failed tests + test files that failed without a failing test (a file that did not load,
//          a failing beforeAll/afterAll) + unreadable reports + reports that say success: false
//          with nothing else failed; with --exit-code N (the test command's exit status) and N != 0
//          while nothing above counted a failure, 1 more (the run died, timed out, or a package's
//          vitest never wrote a report).
// Exits 1 when failed > 0 or passed == 0, else 0.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The first line of each attempt's error (a retried test has one per attempt), in order. vitest
 * reports its own test timeout with the stack of where the test was declared, whose first line is
 * "Error: STACK_TRACE_ERROR": said here as what it is.
 */
function attempts(t) {
  const lines = (Array.isArray(t.failureMessages) ? t.failureMessages : []).map((m) => {
    const first = String(m).split("\n")[0];
    return first.includes("STACK_TRACE_ERROR") ? "the test's own timeout" : first.slice(0, 600);
  });
  return lines.map((l, i) => (lines.length > 1 ? `attempt ${i + 1}: ${l}` : l)).join("; ");
}

const args = process.argv.slice(2);
let dir;
let exitCode = 0;
for (let i = 0; i < args.length; i++) {
  let value;
  if (args[i] === "--exit-code") value = args[++i] ?? "";
  else if (args[i].startsWith("--exit-code=")) value = args[i].slice("--exit-code=".length);
  else dir = args[i];
  // Anything but an integer counts as a failed command.
  if (value !== undefined) exitCode = /^\d+$/.test(value) ? Number(value) : 1;
}
if (!dir) {
  console.error("usage: node .ci/summarize-vitest.mjs <dir> [--exit-code N]");
  process.exit(2);
}

const count = (v) => (Number.isFinite(v) && v > 0 ? v : 0);
let passed = 0;
let failed = 0;

let names = [];
try {
  names = readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort();
} catch (error) {
  console.log(`vitest reports: cannot read ${dir} (${error.code ?? error.message})`);
}

for (const name of names) {
  let report;
  try {
    report = JSON.parse(readFileSync(join(dir, name), "utf8"));
    if (report === null || typeof report !== "object") throw new Error("not a JSON object");
  } catch (error) {
    console.log(`  ${name}: unreadable report (${error.message}): counted as 1 failure`);
    failed += 1;
    continue;
  }
  const p = count(report.numPassedTests);
  let f = count(report.numFailedTests);
  const notes = [];

  // Test files that failed with no failing test in them: a file that failed to load, or a failing
  // hook. numFailedTestSuites counts those, but also every describe block and file around a failing
  // test, so when the per-file results are there they say which files these are.
  if (Array.isArray(report.testResults)) {
    for (const file of report.testResults) {
      const tests = Array.isArray(file?.assertionResults) ? file.assertionResults : [];
      // Name every failing test, with the first line of why: the end of CI's output is what is kept
      // of a failed run, and a count alone does not say where to look.
      for (const t of tests) {
        // A retried test that passed keeps its earlier attempts' errors: named, not counted.
        if (t?.status === "passed" && t.failureMessages?.length) {
          notes.push(
            `passed on retry: ${file.name ?? "?"} > ${t.fullName ?? t.title ?? "?"} (${attempts(t)})`,
          );
          continue;
        }
        if (t?.status !== "failed") continue;
        const why = attempts(t);
        notes.push(`failed: ${file.name ?? "?"} > ${t.fullName ?? t.title ?? "?"}${why ? ` (${why})` : ""}`);
      }
      if (file?.status === "failed" && !tests.some((t) => t?.status === "failed")) {
        f += 1;
        const why = String(file.message ?? "")
          .split("\n")[0]
          .slice(0, 200);
        notes.push(`file failed: ${file.name ?? "?"}${why ? ` (${why})` : ""}`);
      }
    }
  } else if (f === 0 && count(report.numFailedTestSuites) > 0) {
    f += count(report.numFailedTestSuites);
    notes.push(`${count(report.numFailedTestSuites)} test suite(s) failed`);
  }
  if (report.success === false && f === 0) {
    f += 1;
    notes.push("report says success: false (no test files?): counted as 1 failure");
  }

  passed += p;
  failed += f;
  console.log(`  ${name}: ${p} passed, ${f} failed`);
  for (const note of notes) console.log(`    ${note}`);
}
console.log(`vitest reports: ${names.length} in ${dir}`);

if (exitCode !== 0 && failed === 0) {
  const why = exitCode === 124 || exitCode === 137 ? " (timed out)" : "";
  console.log(
    `the test command exited ${exitCode}${why} though no report shows a failure: counted as 1 failure`,
  );
  failed += 1;
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
