import { closeMigration, ledgerRows, reopenMigration } from "@drover/engine";
import { type RunService, type ServiceImplementation, timestampFromDate } from "@drover/proto";
import { requireActsFor } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { Precondition } from "./domain-errors.js";
import { requireProvider, requireTenant, requireText } from "./validation.js";

type MigrationControl = Pick<ServiceImplementation<typeof RunService>, "closeMigration">;

/**
 * CloseMigration: a tenant's migration of one source account is over, and its ledger (what makes a
 * re-run idempotent, and explain, revert and verification possible) goes after a grace period
 * (DROVER_CLOSE_GRACE_HOURS) so it does not grow for ever. The answer says what will happen before
 * it does: when the ledger goes, how many rows, and that a run after that imports as if new.
 * Refused while a run of the account is live (engine migration-closures.ts fences the race with a
 * StartRun); `reopen` withdraws a close whose ledger is still there.
 */
export function migrationControl(ctx: CoordinatorContext): MigrationControl {
  return {
    async closeMigration(req, call) {
      const tenantId = requireTenant(req.tenantId);
      requireActsFor(call, tenantId);
      const source = requireProvider(ctx.providers, requireText("source", req.source, 64)).name;
      const scope = {
        tenantId,
        source,
        sourceAccount: requireText("source_account", req.sourceAccount, 256),
      };
      const what = `${scope.source}:${scope.sourceAccount} for tenant "${tenantId}"`;
      if (req.reopen) {
        if (!(await reopenMigration(ctx.db, scope)))
          throw new Precondition(
            `the migration of ${what} is not closed, or its ledger is already removed (a run now imports it as new)`,
            "MIGRATION_NOT_CLOSED",
          );
        ctx.logger.info(scope, "migration reopened");
        const rows = await ledgerRows(ctx.db, scope);
        return {
          ledgerRows: BigInt(rows),
          message: `the migration of ${what} is open again: its ${rows} ledger rows stay, and runs of it may start`,
        };
      }
      const closure = await closeMigration(ctx.db, scope, ctx.config.closeGraceMs);
      const rows = await ledgerRows(ctx.db, scope);
      ctx.logger.info({ ...scope, remove_after: closure.removeAfter }, "migration closed");
      return {
        closedAt: timestampFromDate(closure.closedAt),
        removeAfter: timestampFromDate(closure.removeAfter),
        ledgerRows: BigInt(rows),
        message: `the migration of ${what} is closed: its ${rows} ledger rows are removed after ${closure.removeAfter.toISOString()}; until then no run of the account starts (reopen to withdraw the close), and a run after that imports as if new, every source row written again as for a new tenant`,
      };
    },
  };
}
