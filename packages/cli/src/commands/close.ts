import { CloseMigrationResponseSchema } from "@drover/proto";
import { type CommandContext, need } from "../command-context.js";

/**
 * `drover close`: close a tenant's migration of one source account (its ledger removed after the
 * grace period; a run after that imports as if new), or `--reopen` it while its ledger is there.
 * The coordinator's answer says what will happen, and it is printed as is.
 */
export async function close({ client, flags, print }: CommandContext): Promise<number> {
  const response = await client.closeMigration({
    tenantId: need(flags, "tenant"),
    source: (flags.source as string | undefined) ?? "crm",
    sourceAccount: need(flags, "account"),
    reopen: flags.reopen === true,
  });
  print(response.message, CloseMigrationResponseSchema, response);
  return 0;
}
