import type { Db } from "@drover/db";
import type { ClientOptions } from "@drover/proto";
import type { Provider } from "@drover/provider-sdk";
import type { Logger } from "@drover/telemetry";
import type { BudgetKeeper } from "./budget-keeper.js";
import type { CoordinatorConfig } from "./config.js";

/** What the coordinator's parts share; built once in coordinator.ts. */
export interface CoordinatorContext {
  db: Db;
  config: CoordinatorConfig;
  providers: ReadonlyMap<string, Provider>;
  logger: Logger;
  /**
   * Deals the pool's lane slots out among the live runs (fair shares, the tenant cap) and publishes
   * each run's deficit of tasks; returns how many were published (dispatcher.ts). Given the run
   * that moved, only its slice's runs are dealt again; without one, every slice.
   */
  dispatch(runId?: string): Promise<number>;
  /** Source budgets; authoritative only on the leader. */
  budgets: BudgetKeeper;
  isLeader(): boolean;
  /** Transport credentials for calls to other coordinators (TLS when the server uses it). */
  clientCredentials?: ClientOptions["credentials"];
}
