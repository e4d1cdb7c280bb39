export { loadWorkerConfig, type WorkerConfig } from "./config.js";
export { LeasedPacer, SourceBudgets } from "./source-budget.js";
export { startWorker, type Worker, type WorkerOptions, type WorkerState } from "./worker.js";
