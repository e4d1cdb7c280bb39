import { runServiceMain } from "@drover/config";
import { createLogger } from "@drover/telemetry";
import { loadReceiverConfig } from "./config.js";
import { startReceiver } from "./service.js";

const logger = createLogger("receiver");

runServiceMain({
  name: "drover receiver",
  logger,
  load: () => loadReceiverConfig(),
  start: (config) => startReceiver(config, logger),
  ready: (running) => ({ event: "receiving", url: running.url }),
});
