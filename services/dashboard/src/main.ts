import { runServiceMain } from "@drover/config";
import {
  createLogger,
  initTelemetry,
  type MetricsServer,
  serveMetrics,
  type TelemetryHandle,
} from "@drover/telemetry";
import { loadDashboardConfig } from "./config.js";
import { startDashboard } from "./dashboard.js";

const logger = createLogger("dashboard");
let telemetry: TelemetryHandle | undefined;
let metricsServer: MetricsServer | undefined;

runServiceMain({
  name: "drover dashboard",
  logger,
  load: () => loadDashboardConfig(),
  start: async (config) => {
    telemetry = initTelemetry({ serviceName: "drover-dashboard" });
    if (config.DROVER_METRICS_PORT !== null)
      metricsServer = await serveMetrics({
        host: config.DROVER_METRICS_HOST,
        port: config.DROVER_METRICS_PORT,
      });
    return startDashboard(config, { logger });
  },
  // Parents (the demo, tests) read this line to learn the URL when DROVER_DASHBOARD_ADDRESS ends in :0.
  ready: (dashboard) => ({
    event: "listening",
    url: dashboard.url,
    ...(metricsServer ? { metrics: metricsServer.url } : {}),
  }),
  afterStop: async () => {
    await metricsServer?.close();
    await telemetry?.shutdown();
  },
});
