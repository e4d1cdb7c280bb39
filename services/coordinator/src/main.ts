import { runServiceMain } from "@drover/config";
import { createLogger, type ServiceObservability, startServiceObservability } from "@drover/telemetry";
import { loadCoordinatorConfig } from "./config.js";
import { startCoordinator } from "./coordinator.js";

const logger = createLogger("coordinator");
let observability: ServiceObservability | undefined;

runServiceMain({
  name: "drover coordinator",
  logger,
  load: () => loadCoordinatorConfig(),
  start: async (config) => {
    observability = await startServiceObservability("drover-coordinator", config.metrics);
    return startCoordinator(config, { logger });
  },
  // Parents (the demo, tests) read this line to learn the port when DROVER_GRPC_ADDRESS ends in :0.
  ready: (coordinator) => ({
    event: "listening",
    address: coordinator.address,
    ...observability?.readyFields,
  }),
  afterStop: async () => {
    await observability?.stop();
  },
});
