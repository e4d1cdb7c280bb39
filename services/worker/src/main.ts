import { runServiceMain } from "@drover/config";
import {
  createLogger,
  initTelemetry,
  type MetricsServer,
  serveMetrics,
  type TelemetryHandle,
} from "@drover/telemetry";
import { loadWorkerConfig } from "./config.js";
import { startWorker } from "./worker.js";

const logger = createLogger("worker");
let telemetry: TelemetryHandle | undefined;
let metricsServer: MetricsServer | undefined;

runServiceMain({
  name: "drover worker",
  logger,
  load: () => loadWorkerConfig(),
  start: async (config) => {
    telemetry = initTelemetry({ serviceName: "drover-worker" });
    if (config.DROVER_METRICS_PORT !== null)
      metricsServer = await serveMetrics({
        host: config.DROVER_METRICS_HOST,
        port: config.DROVER_METRICS_PORT,
      });
    return startWorker(config, { logger });
  },
  ready: (worker) => ({
    event: "pulling",
    worker_id: worker.id,
    ...(metricsServer ? { metrics: metricsServer.url } : {}),
  }),
  afterStop: async () => {
    await metricsServer?.close();
    await telemetry?.shutdown();
  },
});
