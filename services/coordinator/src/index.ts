export { type CoordinatorConfig, loadCoordinatorConfig } from "./config.js";
export { type Coordinator, type CoordinatorOptions, startCoordinator } from "./coordinator.js";
export { KEYS_USAGE, type KeysIo, keysCommand } from "./keys-command.js";
export { buildPlan } from "./plan.js";
export { type ReaperReport, reaperPass } from "./reaper.js";
