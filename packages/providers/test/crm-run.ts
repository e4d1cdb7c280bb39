import type { SecretKeyring } from "@drover/auth";
import type { Db } from "@drover/db";
import { sourceSecretContext } from "@drover/engine";
import { sql } from "drizzle-orm";

/**
 * A running crm run of one phase holding `kinds`, its API token sealed for this run as the
 * coordinator stores it: only the task runner opens it. Returns the run's id.
 */
export async function insertCrmRun(
  db: Db,
  secrets: SecretKeyring,
  run: {
    tenantId: string;
    sourceAccount: string;
    kinds: readonly string[];
    baseUrl: string;
    token: string;
    settings?: Record<string, string>;
    startedAt?: Date;
  },
): Promise<string> {
  const sourceConfig = { baseUrl: run.baseUrl, settings: run.settings ?? {} };
  const [row] = await db.execute<{ id: string }>(sql`
    insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, source_config, current_phase, started_at)
    values (${run.tenantId}, 'crm', ${run.sourceAccount}, ${sql.param([...run.kinds])}::text[], ${JSON.stringify([run.kinds])}::jsonb,
            'running', ${JSON.stringify(sourceConfig)}::jsonb, 0, ${(run.startedAt ?? new Date()).toISOString()}::timestamptz)
    returning id`);
  const sealed = secrets.seal(run.token, sourceSecretContext(row!.id));
  await db.execute(sql`
    update drover.runs set source_secret_ciphertext = ${sealed.ciphertext}, source_secret_key_id = ${sealed.keyId}
     where id = ${row!.id}::uuid`);
  return row!.id;
}
