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

export async function insertApiKey(db: Db, key: ApiKey, note?: string): Promise<void> {
  await db.insert(apiKeys).values({
    keyId: key.keyId,
    tokenHash: key.hash,
    scopes: key.scopes.map(formatScope),
    note: note ?? null,
  });
}

/** Revokes a stored key; false when there is no such key or it was already revoked. */
export async function revokeApiKey(db: Db, keyId: string): Promise<boolean> {
  const rows = await db
    .update(apiKeys)
    .set({ revokedAt: sql`now()` })
    .where(and(eq(apiKeys.keyId, keyId), isNull(apiKeys.revokedAt)))
    .returning({ keyId: apiKeys.keyId });
  return rows.length === 1;
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
