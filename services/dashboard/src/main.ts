import { runServiceMain } from "@drover/config";
import { createLogger, type ServiceObservability, startServiceObservability } from "@drover/telemetry";
import { loadDashboardConfig } from "./config.js";
import { startDashboard } from "./dashboard.js";

const logger = createLogger("dashboard");
let observability: ServiceObservability | undefined;

runServiceMain({
  name: "drover dashboard",
  logger,
  load: () => loadDashboardConfig(),
  start: async (config) => {
    observability = await startServiceObservability("drover-dashboard", config.metrics);
    return startDashboard(config, { logger });
  },
  // Parents (the demo, tests) read this line to learn the URL when DROVER_DASHBOARD_ADDRESS ends in :0.
  ready: (dashboard) => ({
    event: "listening",
    url: dashboard.url,
    ...observability?.readyFields,
  }),
  afterStop: async () => {
    await observability?.stop();
  },
});
