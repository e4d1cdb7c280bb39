import type { SealedSecret, SecretKeyring } from "@drover/auth";
import type { Db } from "@drover/db";
import { sourceSecretContext, storeResealedSecret, storeSealedLegacySecret } from "@drover/engine";
import { sql } from "drizzle-orm";

/**
 * The customer's source credential at rest: sealed by the coordinator the moment StartRun admits
 * it, opened only by the worker's task runner (@drover/engine openSourceSecret). The run id is the
 * associated data, so a ciphertext copied onto another run does not open.
 */
export function sealSourceSecret(keyring: SecretKeyring, runId: string, secret: string): SealedSecret {
  return keyring.seal(secret, sourceSecretContext(runId));
}

const BATCH = 200;

/**
 * Encrypts plaintext credentials written before encryption existed (runs.source_secret) and
 * clears them. Run at every start; a no-op once done. Returns how many were sealed.
 */
export async function sealLegacySecrets(db: Db, keyring: SecretKeyring): Promise<number> {
  let sealed = 0;
  for (;;) {
    const rows = await db.execute<{ id: string; source_secret: string }>(sql`
      select id, source_secret from drover.runs where source_secret is not null limit ${BATCH}`);
    if (rows.length === 0) return sealed;
    for (const row of rows) {
      const box = sealSourceSecret(keyring, row.id, row.source_secret);
      if (await storeSealedLegacySecret(db, row.id, box)) sealed++;
    }
  }
}

/**
 * Re-encrypts every stored credential that is not under the keyring's first key: the step of a
 * key rotation after the new key is first everywhere and before the old one is removed. A secret
 * whose key is not configured is left alone and counted. Fenced on the old key id, so a concurrent
 * run of this changes nothing twice.
 */
export async function reencryptSecrets(
  db: Db,
  keyring: SecretKeyring,
): Promise<{ reencrypted: number; unreadable: number }> {
  let reencrypted = 0;
  let unreadable = 0;
  let after = "00000000-0000-0000-0000-000000000000";
  for (;;) {
    const rows = await db.execute<{ id: string; ciphertext: string; key_id: string }>(sql`
      select id, source_secret_ciphertext as ciphertext, source_secret_key_id as key_id from drover.runs
       where source_secret_ciphertext is not null and source_secret_key_id <> ${keyring.primaryKeyId}
         and id > ${after}::uuid
       order by id limit ${BATCH}`);
    if (rows.length === 0) return { reencrypted, unreadable };
    for (const row of rows) {
      after = row.id;
      let secret: string;
      try {
        secret = keyring.open({ keyId: row.key_id, ciphertext: row.ciphertext }, sourceSecretContext(row.id));
      } catch {
        unreadable++;
        continue;
      }
      const box = sealSourceSecret(keyring, row.id, secret);
      if (await storeResealedSecret(db, row.id, row.key_id, box)) reencrypted++;
    }
  }
}
