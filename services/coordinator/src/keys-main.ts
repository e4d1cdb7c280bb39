import { keysCommand } from "./keys-command.js";

// `pnpm --filter @drover/coordinator keys ...`: issue, revoke and list API keys; rotate secrets.
keysCommand(process.argv.slice(2), {
  env: process.env,
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
}).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`drover keys: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
