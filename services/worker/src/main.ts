import { runServiceMain } from "@drover/config";
import { isConnectionError, pgErrorCode } from "@drover/db";
import { createLogger, type ServiceObservability, startServiceObservability } from "@drover/telemetry";
import { loadWorkerConfig } from "./config.js";
import { startWorker } from "./worker.js";

const logger = createLogger("worker");
let observability: ServiceObservability | undefined;

// A connection the database ended (pg_terminate_backend, a failover: SQLSTATE 57P01, class 08, or
// the socket gone) can reject a promise no caller awaits any more, such as the end of a transaction
// the window deadline abandoned; the chaos suite's terminate-db-connections fault once crashed a
// worker so. Every write is fenced on its claim and checkpointed, so such a rejection changes
// nothing: it is logged instead of ending a worker that holds other tasks. Any other unhandled
// rejection still ends the process, as Node's default does.
process.on("unhandledRejection", (reason) => {
  const code = pgErrorCode(reason);
  if (isConnectionError(reason) || code === "57P01" || code?.startsWith("08")) {
    logger.warn({ err: reason }, "a database connection ended under a promise nobody awaited; ignored");
    return;
  }
  throw reason;
});

runServiceMain({
  name: "drover worker",
  logger,
  load: () => loadWorkerConfig(),
  start: async (config) => {
    observability = await startServiceObservability("drover-worker", config.metrics);
    const worker = await startWorker(config, { logger });
    // A worker that failed has handed back its tasks and closed; it exits non-zero so its process
    // manager sees the failure and restarts it, instead of it retrying unseen forever.
    const exitFailed = async (err: unknown) => {
      logger.fatal({ err, state: worker.state }, "drover worker failed");
      await observability?.stop().catch(() => {});
      process.exit(1);
    };
    // A failure while shutting itself down is still a failure.
    void worker.failed.then(exitFailed, exitFailed);
    return worker;
  },
  ready: (worker) => ({
    event: "pulling",
    worker_id: worker.id,
    ...observability?.readyFields,
  }),
  afterStop: async () => {
    await observability?.stop();
  },
});
