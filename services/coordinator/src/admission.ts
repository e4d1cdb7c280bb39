import { type Db, LIVE_RUN_STATUSES, pgErrorCode, type RunRow, runs } from "@drover/db";
import { admitRun, type NewRun } from "@drover/engine";
import { Code, RpcError } from "@drover/proto";
import { PermanentError, type Provider } from "@drover/provider-sdk";
import { and, eq, inArray } from "drizzle-orm";

/**
 * Admits a run and seeds its first phase (engine admitRun, one transaction). One live run per
 * tenant and source account is enforced by a partial unique index, so two coordinators admitting
 * at the same instant cannot both win; the loser answers ALREADY_EXISTS naming the run that holds
 * the slot. A dry run writes nothing and is left out of the index: it never holds the slot, and a
 * real run of the same tenant and source starts beside it. A run its provider cannot seed as
 * configured answers INVALID_ARGUMENT with the provider's reason.
 */
export async function admit(db: Db, provider: Provider, input: NewRun): Promise<RunRow> {
  try {
    return await admitRun(db, provider, input);
  } catch (err) {
    if (pgErrorCode(err) === "23505") throw await conflict(db, input);
    // The provider's seeding refused the run as configured (a destination table that does not
    // exist, or lacks a mapped column or its unique key): the caller's to fix, and nothing was
    // written (one transaction). Left to the default mapping it reached the caller as INTERNAL.
    if (err instanceof PermanentError)
      throw new RpcError(Code.INVALID_ARGUMENT, `source_config: ${err.message}`);
    throw err;
  }
}

/** The error for a start, resume or retry that would put a second live run on one tenant and source. */
export async function conflict(
  db: Db,
  scope: { tenantId: string; source: string; sourceAccount: string },
  exceptRunId?: string,
): Promise<RpcError> {
  const live = await db
    .select({ id: runs.id, status: runs.status })
    .from(runs)
    .where(
      and(
        eq(runs.tenantId, scope.tenantId),
        eq(runs.source, scope.source),
        eq(runs.sourceAccount, scope.sourceAccount),
        inArray(runs.status, [...LIVE_RUN_STATUSES]),
        // A dry run holds no slot (runs_one_live_per_source leaves it out): never the one named.
        eq(runs.dryRun, false),
      ),
    );
  const other = live.find((r) => r.id !== exceptRunId);
  return new RpcError(
    Code.ALREADY_EXISTS,
    other
      ? `tenant "${scope.tenantId}" already has a live run from ${scope.source}:${scope.sourceAccount}: run ${other.id} is ${other.status}; stop it or wait for it to finish`
      : `tenant "${scope.tenantId}" already has a live run from ${scope.source}:${scope.sourceAccount}`,
    other ? { run_id: other.id } : {},
  );
}
