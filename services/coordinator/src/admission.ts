import type { Db, RunRow } from "@drover/db";
import { admitRun, type NewRun } from "@drover/engine";
import { PermanentError, type Provider } from "@drover/provider-sdk";
import { InvalidInput } from "./domain-errors.js";

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
    // The provider's seeding refused the run as configured (a destination table that does not
    // exist, or lacks a mapped column or its unique key): the caller's to fix, and nothing was
    // written (one transaction). Left to the default mapping it reached the caller as INTERNAL.
    if (err instanceof PermanentError) throw new InvalidInput(`source_config: ${err.message}`);
    throw err;
  }
}
