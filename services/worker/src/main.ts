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
    const worker = await startWorker(config, { logger });
    // A worker that failed has handed back its tasks and closed; it exits non-zero so its process
    // manager sees the failure and restarts it, instead of it retrying unseen forever.
    const exitFailed = async (err: unknown) => {
      logger.fatal({ err, state: worker.state }, "drover worker failed");
      await observability?.stop().catch(() => {});
      process.exit(1);
    };
    // A failure while shutting itself down is still a failure.
    void worker.failed.then(exitFailed, exitFailed);
    return worker;
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
