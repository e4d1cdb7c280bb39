import { runServiceMain } from "@drover/config";
import { createLogger, type ServiceObservability, startServiceObservability } from "@drover/telemetry";
import { loadWorkerConfig } from "./config.js";
import { startWorker } from "./worker.js";

const logger = createLogger("worker");
let observability: ServiceObservability | undefined;

runServiceMain({
  name: "drover worker",
  logger,
  load: () => loadWorkerConfig(),
  start: async (config) => {
    observability = await startServiceObservability("drover-worker", config);
    return startWorker(config, { logger });
  },
  ready: (worker) => ({
    event: "pulling",
    worker_id: worker.id,
    ...observability?.readyFields,
  }),
  afterStop: async () => {
    await observability?.stop();
  },
});
