export { type CoordinatorConfig, loadCoordinatorConfig } from "./config.js";
export { type Coordinator, type CoordinatorOptions, startCoordinator } from "./coordinator.js";
export { buildPlan } from "./plan.js";
export { sweep } from "./reaper.js";
