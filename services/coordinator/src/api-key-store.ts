import {
  type ApiKey,
  ApiKeyring,
  formatScope,
  issueApiKey,
  type Principal,
  parseScope,
  principalOf,
  type Scope,
} from "@drover/auth";
import { type ApiKeyRow, apiKeys, type Db } from "@drover/db";
import type { Logger } from "@drover/telemetry";
import { and, asc, eq, isNull, sql } from "drizzle-orm";
import { type AuditEvent, KEY_ACTIONS, localActor, recordAuditEvent } from "./audit-trail.js";

/**
 * Keys come from two places, and both count: those configured in DROVER_API_KEYS (for credentials
 * an orchestrator hands out, e.g. the workers'), and those issued at run time into drover.api_keys
 * with `pnpm --filter @drover/coordinator keys`. Only token hashes are kept in either.
 */

/** The keys in drover.api_keys that are not revoked. */
export async function storedApiKeys(db: Db): Promise<ApiKey[]> {
  const rows = await db.select().from(apiKeys).where(isNull(apiKeys.revokedAt));
  return rows.flatMap((row) => {
    const key = toApiKey(row);
    return key ? [key] : [];
  });
}

export async function listStoredApiKeys(db: Db): Promise<ApiKeyRow[]> {
  return db.select().from(apiKeys).orderBy(asc(apiKeys.createdAt), asc(apiKeys.keyId));
}

/**
 * Stores a new key, and its audit event in the same transaction: a key never exists without the
 * record of who issued it. `actor` is who did it (audit-trail.ts localActor).
 */
export async function insertApiKey(
  db: Db,
  key: ApiKey,
  note: string | undefined,
  actor: string,
): Promise<void> {
  const scopes = key.scopes.map(formatScope);
  await db.transaction(async (tx) => {
    await tx.insert(apiKeys).values({ keyId: key.keyId, tokenHash: key.hash, scopes, note: note ?? null });
    await recordAuditEvent(tx, keyChange(KEY_ACTIONS.issue, actor, key.keyId, { scopes: scopes.join("+") }));
  });
}

/**
 * Revokes a stored key, recording who did it in the same transaction; false when there is no such
 * key or it was already revoked (nothing changed, nothing recorded: the caller records the refusal).
 */
export async function revokeApiKey(db: Db, keyId: string, actor: string): Promise<boolean> {
  return db.transaction(async (tx) => {
    const rows = await tx
      .update(apiKeys)
      .set({ revokedAt: sql`now()` })
      .where(and(eq(apiKeys.keyId, keyId), isNull(apiKeys.revokedAt)))
      .returning({ scopes: apiKeys.scopes });
    const [revoked] = rows;
    if (!revoked) return false;
    await recordAuditEvent(
      tx,
      keyChange(KEY_ACTIONS.revoke, actor, keyId, { scopes: revoked.scopes.join("+") }),
    );
    return true;
  });
}

/** An API-key change as the audit trail records it: made outside the API, so by no key and of no tenant. */
export function keyChange(
  action: string,
  actor: string,
  keyId: string,
  details: Record<string, string>,
  refusal?: { outcome: string; message: string },
): AuditEvent {
  return {
    keyId: null,
    actor,
    scopes: "",
    action,
    tenantId: null,
    runId: null,
    peer: "local",
    outcome: refusal?.outcome ?? "ok",
    message: refusal?.message ?? null,
    details: { key_id: keyId, ...details },
  };
}

export interface DevKeys {
  admin: string;
  worker: string;
}

/**
 * At the very first start (no key configured, and drover.api_keys has never held one) issues a
 * development admin key and worker key, stores their hashes, and returns the tokens for the caller
 * to print once. Later starts, other replicas starting at the same instant, and a table whose keys
 * were all revoked get nothing: the keys script issues new ones.
 */
export async function ensureDevKeys(db: Db, configuredKeys: number): Promise<DevKeys | undefined> {
  if (configuredKeys > 0) return undefined;
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext('drover.api_keys.dev'))`);
    const [any] = await tx.execute<{ n: number }>(sql`select count(*)::int as n from drover.api_keys`);
    if ((any?.n ?? 0) > 0) return undefined;
    const admin = issueApiKey([{ kind: "admin" }], "dev-admin");
    const worker = issueApiKey([{ kind: "worker" }], "dev-worker");
    const note = "generated at first start for development; revoke once real keys are issued";
    await tx.insert(apiKeys).values(
      [admin.key, worker.key].map((k) => ({
        keyId: k.keyId,
        tokenHash: k.hash,
        scopes: k.scopes.map(formatScope),
        note,
      })),
    );
    for (const k of [admin.key, worker.key])
      await recordAuditEvent(
        tx,
        keyChange(KEY_ACTIONS.issue, localActor("coordinator first start"), k.keyId, {
          scopes: k.scopes.map(formatScope).join("+"),
        }),
      );
    return { admin: admin.token, worker: worker.token };
  });
}

/**
 * Who a bearer token belongs to. Configured keys are fixed for the process's life; stored keys are
 * re-read at most every `refreshMs`, so a key issued or revoked with the keys script takes effect
 * within that time on every replica.
 */
export class ApiKeyAuthenticator {
  private readonly configured: ApiKeyring;
  private stored = new ApiKeyring([]);
  private loadedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<void> | undefined;
  private everLoaded = false;

  constructor(
    private readonly db: Db,
    configured: readonly ApiKey[],
    private readonly options: { refreshMs: number; logger?: Logger },
  ) {
    this.configured = new ApiKeyring(configured);
  }

  /** Undefined for an unknown or revoked token. Throws only when the keys cannot be read at all. */
  async authenticate(token: string): Promise<Principal | undefined> {
    const configured = this.configured.find(token);
    if (configured) return principalOf(configured);
    if (Date.now() - this.loadedAt >= this.options.refreshMs) await this.refresh();
    const stored = this.stored.find(token);
    return stored ? principalOf(stored) : undefined;
  }

  /** Re-reads drover.api_keys (one read at a time). A failure keeps the last good set. */
  refresh(): Promise<void> {
    this.loading ??= storedApiKeys(this.db)
      .then((keys) => {
        this.stored = new ApiKeyring(keys);
        this.loadedAt = Date.now();
        this.everLoaded = true;
      })
      .catch((err: unknown) => {
        if (!this.everLoaded) throw err;
        this.options.logger?.warn({ err }, "re-reading drover.api_keys failed; using the keys read before");
        this.loadedAt = Date.now();
      })
      .finally(() => {
        this.loading = undefined;
      });
    return this.loading;
  }
}

function toApiKey(row: ApiKeyRow): ApiKey | undefined {
  try {
    const scopes: Scope[] = row.scopes.map(parseScope);
    return scopes.length > 0 ? { keyId: row.keyId, hash: row.tokenHash, scopes } : undefined;
  } catch {
    // A row nobody could have written through the script: it grants nothing.
    return undefined;
  }
}
