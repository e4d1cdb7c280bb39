import { runServiceMain } from "@drover/config";
import { createLogger, initTelemetry, type TelemetryHandle } from "@drover/telemetry";
import { loadCoordinatorConfig } from "./config.js";
import { startCoordinator } from "./coordinator.js";

const logger = createLogger("coordinator");
let telemetry: TelemetryHandle | undefined;

runServiceMain({
  name: "drover coordinator",
  logger,
  load: () => loadCoordinatorConfig(),
  start: (config) => {
    telemetry = initTelemetry({ serviceName: "drover-coordinator" });
    return startCoordinator(config, { logger });
  },
  // Parents (the demo, tests) read this line to learn the port when DROVER_GRPC_ADDRESS ends in :0.
  ready: (coordinator) => ({ event: "listening", address: coordinator.address }),
  afterStop: async () => telemetry?.shutdown(),
});
