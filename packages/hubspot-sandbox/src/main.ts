#!/usr/bin/env -S node --import tsx --conditions=@drover/source
import { CliError, parseCliArgs, USAGE } from "./cli-args.js";
import { type HubSpotSandbox, OptionsError, startSandbox } from "./index.js";

const EXIT_USAGE = 2;

function fail(issues: string[]): never {
  process.stderr.write(`hubspot-sandbox: invalid arguments\n  ${issues.join("\n  ")}\n\n${USAGE}\n`);
  process.exit(EXIT_USAGE);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  let sandbox: HubSpotSandbox;
  try {
    sandbox = await startSandbox(parseCliArgs(argv, process.env));
  } catch (error) {
    if (error instanceof CliError || error instanceof OptionsError) fail(error.issues);
    throw error;
  }
  // Exactly one line on stdout: callers wait for it and parse it to learn the port.
  process.stdout.write(`${JSON.stringify({ event: "listening", url: sandbox.url, port: sandbox.port })}\n`);
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`hubspot-sandbox: ${signal}, closing\n`);
    sandbox.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`hubspot-sandbox: close failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `hubspot-sandbox: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
