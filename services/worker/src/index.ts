export { BudgetLeases, LeasedBudgetPacer } from "./budget-leases.js";
export { loadWorkerConfig, type WorkerConfig } from "./config.js";
export { startWorker, type Worker, type WorkerOptions, type WorkerState } from "./worker.js";
