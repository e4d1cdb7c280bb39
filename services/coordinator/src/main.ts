import { runServiceMain } from "@drover/config";
import {
  createLogger,
  initTelemetry,
  type MetricsServer,
  serveMetrics,
  type TelemetryHandle,
} from "@drover/telemetry";
import { loadCoordinatorConfig } from "./config.js";
import { startCoordinator } from "./coordinator.js";

const logger = createLogger("coordinator");
let telemetry: TelemetryHandle | undefined;
let metricsServer: MetricsServer | undefined;

runServiceMain({
  name: "drover coordinator",
  logger,
  load: () => loadCoordinatorConfig(),
  start: async (config) => {
    telemetry = initTelemetry({ serviceName: "drover-coordinator" });
    if (config.DROVER_METRICS_PORT !== null)
      metricsServer = await serveMetrics({
        host: config.DROVER_METRICS_HOST,
        port: config.DROVER_METRICS_PORT,
      });
    return startCoordinator(config, { logger });
  },
  // Parents (the demo, tests) read this line to learn the port when DROVER_GRPC_ADDRESS ends in :0.
  ready: (coordinator) => ({
    event: "listening",
    address: coordinator.address,
    ...(metricsServer ? { metrics: metricsServer.url } : {}),
  }),
  afterStop: async () => {
    await metricsServer?.close();
    await telemetry?.shutdown();
  },
});
