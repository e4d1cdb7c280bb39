import { ConfigError } from "@drover/config";
import { createLogger, initTelemetry } from "@drover/telemetry";
import { loadWorkerConfig } from "./config.js";
import { startWorker } from "./worker.js";

const logger = createLogger("worker");

async function main(): Promise<void> {
  let config: ReturnType<typeof loadWorkerConfig>;
  try {
    config = loadWorkerConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`drover worker: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const telemetry = initTelemetry({ serviceName: "drover-worker" });
  const worker = await startWorker(config, { logger });
  process.stdout.write(`${JSON.stringify({ event: "pulling", worker_id: worker.id })}\n`);

  let signals = 0;
  const shutdown = (signal: string) => {
    signals++;
    if (signals > 1) {
      // A second signal means "now": the reaper releases whatever was still running.
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    logger.info({ signal }, "shutting down gracefully");
    worker
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
  logger.fatal({ err }, "worker failed to start");
  process.exit(1);
});
