import { SecretKeyMissingError, type SecretKeyring } from "@drover/auth";
import type { RunRow } from "@drover/db";
import { PermanentError, type RunInfo, TransientError } from "@drover/provider-sdk";

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
