// `pnpm test:model -- --runs N [--seed S --path P --replay-path R] [--max-commands M]`: the generated sequences of
// model/ledger-model.test.ts alone, as many as asked; a failure prints the seed and path to replay.
import { spawnSync } from "node:child_process";

const env = { ...process.env };
const names = {
  "--runs": "DROVER_MODEL_RUNS",
  "--seed": "DROVER_MODEL_SEED",
  "--path": "DROVER_MODEL_PATH",
  "--replay-path": "DROVER_MODEL_REPLAY_PATH",
  "--max-commands": "DROVER_MODEL_MAX_COMMANDS",
};
const args = process.argv.slice(2).filter((a) => a !== "--");
for (let i = 0; i < args.length; i++) {
  const name = names[args[i]];
  if (!name || args[i + 1] === undefined) {
    console.error(
      `usage: pnpm test:model -- [--runs N] [--seed S --path P --replay-path R] [--max-commands M]; got ${args[i]}`,
    );
    process.exit(2);
  }
  env[name] = args[++i];
}
const run = spawnSync("npx", ["vitest", "run", "--config", "model/vitest.config.ts"], {
  stdio: "inherit",
  env,
});
process.exit(run.status ?? 1);
