// `pnpm test:chaos [-- --soak <duration>]`: the chaos suite; with --soak (e.g. 30m, 2h, 90s) only the
// soak, which keeps starting runs under faults until the duration is spent and prints its figures.
import { spawnSync } from "node:child_process";

const args = process.argv.slice(2).filter((a) => a !== "--");
const env = { ...process.env };
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] !== "--soak") {
    files.push(args[i]);
    continue;
  }
  const match = /^(\d+)(s|m|h)$/.exec(args[i + 1] ?? "");
  if (!match) {
    console.error(
      `usage: pnpm test:chaos -- --soak <duration, e.g. 30m, 2h or 90s>; got "${args[i + 1] ?? ""}"`,
    );
    process.exit(2);
  }
  env.CHAOS_SOAK_MS = String(Number(match[1]) * { s: 1_000, m: 60_000, h: 3_600_000 }[match[2]]);
  files.push("soak");
  i++;
}
const run = spawnSync("npx", ["vitest", "run", "--config", "chaos/vitest.config.ts", ...files], {
  stdio: "inherit",
  env,
});
process.exit(run.status ?? 1);
