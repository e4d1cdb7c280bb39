import type { Db } from "@drover/db";
import { sources as providers } from "@drover/source-registry";
import { createLogger } from "@drover/telemetry";
import { BudgetKeeper } from "../src/budget-keeper.js";
import { loadCoordinatorConfig } from "../src/config.js";
import type { CoordinatorContext } from "../src/context.js";

/**
 * A leader's context over a test database, as the coordinator builds it, with a silent logger and a
 * dispatch that publishes nothing (`dispatch` replaces it). `env` is the coordinator's settings.
 */
export function testContext(
  db: Db,
  env: Record<string, string> = {},
  dispatch: CoordinatorContext["dispatch"] = async () => 0,
): CoordinatorContext {
  return {
    budgets: new BudgetKeeper(db),
    isLeader: () => true,
    db,
    config: loadCoordinatorConfig(env),
    providers,
    logger: createLogger("test", { level: "silent" }),
    dispatch,
  };
}
