import { runServiceMain } from "@drover/config";
import { createLogger, initTelemetry, type TelemetryHandle } from "@drover/telemetry";
import { loadWorkerConfig } from "./config.js";
import { startWorker } from "./worker.js";

const logger = createLogger("worker");
let telemetry: TelemetryHandle | undefined;

runServiceMain({
  name: "drover worker",
  logger,
  load: () => loadWorkerConfig(),
  start: (config) => {
    telemetry = initTelemetry({ serviceName: "drover-worker" });
    return startWorker(config, { logger });
  },
  ready: (worker) => ({ event: "pulling", worker_id: worker.id }),
  afterStop: async () => telemetry?.shutdown(),
});
