import { ConfigError } from "@drover/config";
import { createLogger, initTelemetry } from "@drover/telemetry";
import { loadCoordinatorConfig } from "./config.js";
import { startCoordinator } from "./coordinator.js";

const logger = createLogger("coordinator");

async function main(): Promise<void> {
  let config: ReturnType<typeof loadCoordinatorConfig>;
  try {
    config = loadCoordinatorConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`drover coordinator: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const telemetry = initTelemetry({ serviceName: "drover-coordinator" });
  const coordinator = await startCoordinator(config, { logger });
  // Parents (the demo, tests) read this line to learn the port when DROVER_GRPC_ADDRESS ends in :0.
  process.stdout.write(`${JSON.stringify({ event: "listening", address: coordinator.address })}\n`);

  let signals = 0;
  const shutdown = (signal: string) => {
    signals++;
    if (signals > 1) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    logger.info({ signal }, "shutting down");
    coordinator
      .stop()
      .then(() => telemetry.shutdown())
      .then(() => process.exit(0))
      .catch((err) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      });
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}

main().catch((err) => {
  logger.fatal({ err }, "coordinator failed to start");
  process.exit(1);
});
