import type { Db } from "@drover/db";
import type { Provider } from "@drover/provider-sdk";
import type { Logger } from "@drover/telemetry";
import type { CoordinatorConfig } from "./config.js";

/** What the coordinator's parts share; built once in coordinator.ts. */
export interface CoordinatorContext {
  db: Db;
  config: CoordinatorConfig;
  providers: ReadonlyMap<string, Provider>;
  logger: Logger;
  /** Publishes the run's deficit of tasks. */
  topUp(runId: string): Promise<number>;
}
