import { type Db, LIVE_RUN_STATUSES, pgErrorCode, type RunStatus, runs } from "@drover/db";
import { and, eq, inArray, ne } from "drizzle-orm";

/** The tenant, source and account a live run holds: one live run at a time (runs_one_live_per_source). */
export interface LiveRunScope {
  tenantId: string;
  source: string;
  sourceAccount: string;
}

/**
 * A start, resume, retry, re-drive or revert would put a second live run on one tenant and source
 * account. Names the run holding the slot, when it is still there to name (it may have finished
 * between the refused statement and the look-up).
 */
export class LiveRunConflict extends Error {
  constructor(
    readonly scope: LiveRunScope,
    readonly liveRun: { id: string; status: RunStatus } | undefined,
  ) {
    const holder = `tenant "${scope.tenantId}" already has a live run from ${scope.source}:${scope.sourceAccount}`;
    super(
      liveRun
        ? `${holder}: run ${liveRun.id} is ${liveRun.status}; stop it or wait for it to finish`
        : holder,
    );
    this.name = "LiveRunConflict";
  }
}

/**
 * Runs a transition that makes a run live (inserts one running, or moves one back to running).
 * The partial unique index runs_one_live_per_source is the admission check, so of two such
 * transitions at the same instant one fails with a unique violation (23505); that failure becomes
 * a LiveRunConflict here, once, naming the live run of `scope` other than `runId` (the run being
 * moved). `scope` is read from `runId`'s row when not given.
 */
export async function takingLiveRunSlot<T>(
  db: Db,
  at: { scope?: LiveRunScope; runId?: string },
  transition: () => Promise<T>,
): Promise<T> {
  try {
    return await transition();
  } catch (err) {
    if (pgErrorCode(err) !== "23505") throw err;
    const given = at.scope ?? (at.runId ? await scopeOf(db, at.runId) : undefined);
    if (!given) throw err;
    const scope = { tenantId: given.tenantId, source: given.source, sourceAccount: given.sourceAccount };
    throw new LiveRunConflict(scope, await liveRunOf(db, scope, at.runId));
  }
}

async function scopeOf(db: Db, runId: string): Promise<LiveRunScope | undefined> {
  const [run] = await db
    .select({ tenantId: runs.tenantId, source: runs.source, sourceAccount: runs.sourceAccount })
    .from(runs)
    .where(eq(runs.id, runId));
  return run;
}

/** The live run holding `scope`'s slot, other than `exceptRunId`; a dry run holds none. */
async function liveRunOf(
  db: Db,
  scope: LiveRunScope,
  exceptRunId?: string,
): Promise<{ id: string; status: RunStatus } | undefined> {
  const [live] = await db
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
        exceptRunId ? ne(runs.id, exceptRunId) : undefined,
      ),
    )
    .limit(1);
  return live;
}
