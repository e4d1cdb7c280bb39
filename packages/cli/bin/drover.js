#!/usr/bin/env node
// The `drover` command: runs the CLI's TypeScript source (and the workspace packages' sources,
// through the @drover/source condition) with tsx, in a child Node whose exit code becomes this
// one's, so scripts see the documented codes (2, 4, 5, 69, 75, 77; watch's 1 and 3) unchanged.
// `pnpm drover` goes through `pnpm run`, which turns every non-zero code into 1; this does not.
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { fileURLToPath } from "node:url";

const main = fileURLToPath(new URL("../src/main.ts", import.meta.url));
// Resolved from this package, so the command works from any directory.
const tsx = import.meta.resolve("tsx");
const child = spawn(
  process.execPath,
  ["--import", tsx, "--conditions=@drover/source", main, ...process.argv.slice(2)],
  { stdio: "inherit" },
);
// A terminal's Ctrl-C reaches the child too (same process group); a signal sent to this process
// alone (kill, a supervisor) is passed on, and this process waits for the child to end.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
child.on("error", (err) => {
  process.stderr.write(`drover: cannot start node: ${err.message}\n`);
  process.exit(1);
});
child.on("exit", (code, signal) => {
  process.exit(code ?? 128 + (signal ? constants.signals[signal] : 0));
});
