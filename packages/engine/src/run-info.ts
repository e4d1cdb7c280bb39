import { type SealedSecret, SecretKeyMissingError, type SecretKeyring } from "@drover/auth";
import type { Queryable, RunRow } from "@drover/db";
import { PermanentError, type RunInfo, TransientError } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";

/** What providers see of a run. Never the credential: only the task runner adds it, see openSourceSecret. */
export function toRunInfo(run: RunRow): RunInfo {
  return {
    id: run.id,
    tenantId: run.tenantId,
    source: run.source,
    sourceAccount: run.sourceAccount,
    kinds: run.kinds,
    plan: run.plan,
    sourceConfig: run.sourceConfig,
    secret: undefined,
    startedAt: run.startedAt,
    dryRun: run.dryRun,
  };
}

/** The associated data a run's source secret is sealed with: its ciphertext opens for this run only. */
export function sourceSecretContext(runId: string): string {
  return `drover.runs.source_secret:${runId}`;
}

/**
 * Decrypts the run's source credential, for the provider about to call the source. A key this
 * worker lacks is a deployment in progress (another worker, or this one restarted, may have it), so
 * it is transient; a ciphertext that does not authenticate fails the same way every time, so the
 * task fails. Neither message carries anything secret.
 */
export function openSourceSecret(
  run: Pick<RunRow, "id" | "sourceSecretCiphertext" | "sourceSecretKeyId">,
  secrets: SecretKeyring | undefined,
): string | undefined {
  if (!run.sourceSecretCiphertext || !run.sourceSecretKeyId) return undefined;
  if (!secrets) throw new TransientError("this worker has no secret keys configured (DROVER_SECRET_KEYS)");
  try {
    return secrets.open(
      { keyId: run.sourceSecretKeyId, ciphertext: run.sourceSecretCiphertext },
      sourceSecretContext(run.id),
    );
  } catch (err) {
    const reason = `cannot open the run's source credential: ${(err as Error).message}`;
    throw err instanceof SecretKeyMissingError ? new TransientError(reason) : new PermanentError(reason);
  }
}

/**
 * Stores the sealed form of a plaintext credential written before encryption existed, clearing the
 * plaintext in the same statement. Fenced on the plaintext still being there: done once.
 */
export async function storeSealedLegacySecret(
  q: Queryable,
  runId: string,
  box: SealedSecret,
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.runs
       set source_secret_ciphertext = ${box.ciphertext}, source_secret_key_id = ${box.keyId}, source_secret = null
     where id = ${runId}::uuid and source_secret is not null
    returning id`);
  return rows.length === 1;
}

/**
 * Replaces a credential sealed under `fromKeyId` with its re-sealing under another key (a key
 * rotation). Fenced on the old key id, so two rotations at once change it once.
 */
export async function storeResealedSecret(
  q: Queryable,
  runId: string,
  fromKeyId: string,
  box: SealedSecret,
): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.runs set source_secret_ciphertext = ${box.ciphertext}, source_secret_key_id = ${box.keyId}
     where id = ${runId}::uuid and source_secret_key_id = ${fromKeyId}
    returning id`);
  return rows.length === 1;
}
