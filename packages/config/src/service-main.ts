import { ConfigError } from "./env.js";

interface MainLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  fatal(obj: object, msg: string): void;
}

export interface ServiceMain<C, S extends { stop(): Promise<void> }> {
  /** As it appears in messages: "drover worker". */
  name: string;
  logger: MainLogger;
  /** Compiles the configuration; a ConfigError ends the process with code 2 and its message. */
  load(): C;
  /** A ConfigError here (a setting found wrong only once started) also ends the process with code 2. */
  start(config: C): Promise<S>;
  /** The one JSON line printed on stdout when the service is ready (parents wait for it). */
  ready(service: S): Record<string, unknown>;
  /** After a clean stop, e.g. flushing telemetry. */
  afterStop?(): Promise<void>;
}

/**
 * The life of a service process: configuration checked before anything starts, a ready line, and
 * a staged shutdown — the first SIGTERM or SIGINT stops gracefully, a second one exits at once.
 */
export function runServiceMain<C, S extends { stop(): Promise<void> }>(main: ServiceMain<C, S>): void {
  const { logger } = main;
  const boot = async () => {
    let config: C;
    try {
      config = main.load();
    } catch (err) {
      if (err instanceof ConfigError) {
        process.stderr.write(`${main.name}: ${err.message}\n`);
        process.exit(2);
      }
      throw err;
    }
    const service = await main.start(config);
    process.stdout.write(`${JSON.stringify(main.ready(service))}\n`);

    let signals = 0;
    const shutdown = (signal: string) => {
      if (++signals > 1) {
        // A second signal means "now": the reaper releases whatever was still running.
        logger.warn({ signal }, "second signal: exiting now");
        process.exit(1);
      }
      logger.info({ signal }, "shutting down gracefully");
      service
        .stop()
        .then(() => main.afterStop?.())
        .then(() => process.exit(0))
        .catch((err) => {
          logger.error({ err }, "shutdown failed");
          process.exit(1);
        });
    };
    process.on("SIGTERM", () => shutdown("SIGTERM"));
    process.on("SIGINT", () => shutdown("SIGINT"));
  };
  boot().catch((err) => {
    if (err instanceof ConfigError) {
      logger.fatal({ problems: err.problems }, `${main.name} refused its configuration`);
      process.stderr.write(`${main.name}: ${err.message}\n`);
      process.exit(2);
    }
    logger.fatal({ err }, `${main.name} failed to start`);
    process.exit(1);
  });
}
