import { parseArgs } from "node:util";
import {
  ApiKeyError,
  formatApiKey,
  formatScopes,
  generateSecretKey,
  issueApiKey,
  loadSecretKeyring,
  parseScope,
  type Scope,
  ScopeError,
  SecretKeyError,
} from "@drover/auth";
import { keyringOptions } from "@drover/config";
import { type Db, ensureDatabase, migrateDatabase, openDatabase, pgErrorCode } from "@drover/db";
import { insertApiKey, keyChange, listStoredApiKeys, revokeApiKey } from "./api-key-store.js";
import { KEY_ACTIONS, localActor, recordAuditEvent } from "./audit-trail.js";
import { reencryptSecrets } from "./source-secrets.js";

export const KEYS_USAGE = `Usage: pnpm --filter @drover/coordinator keys <command>

  issue --scope <scope> [--scope <scope>...] [--id <key id>] [--note <text>]
      Stores a new API key (its SHA-256 only) in drover.api_keys and prints its token, once.
      Scopes: admin, worker, read:<id> (read only), tenant:<id> (read and steer, no revert),
      revert:<id> (read and revert); join several with +. Coordinators accept it within
      DROVER_API_KEYS_REFRESH_MS. Recorded in the audit trail (drover.audit_events).
  revoke <key id>
      Revokes a stored key, recorded in the audit trail. (A key in DROVER_API_KEYS is revoked by
      removing it there.)
  list
      The stored keys: ids, scopes, when issued and revoked. Never tokens.
  entry --scope <scope> [--scope <scope>...] [--id <key id>]
      Prints a new token and its DROVER_API_KEYS entry (keyId:sha256hex:scopes); stores nothing.
  new-secret-key <key id>
      Prints a new keyId:base64key entry for DROVER_SECRET_KEYS.
  reencrypt-secrets
      Re-encrypts every stored source secret under the first key of DROVER_SECRET_KEYS (the step
      of a key rotation before the old key is removed).

Reads DATABASE_URL (default postgres://postgres@127.0.0.1:5432/drover) and DROVER_SECRET_KEYS /
DROVER_SECRET_KEYS_FILE like the coordinator. Output is one JSON line per result.`;

export interface KeysIo {
  env: NodeJS.ProcessEnv;
  out(line: string): void;
  err(line: string): void;
}

/** Runs one keys command; returns the process exit code (2: the command line was wrong). */
export async function keysCommand(argv: string[], io: KeysIo): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    io.err(`${(err as Error).message}\n\n${KEYS_USAGE}`);
    return 2;
  }
  const { command, values, positionals } = parsed;
  const json = (value: Record<string, unknown>) => io.out(JSON.stringify(value));
  try {
    switch (command) {
      case "entry": {
        const { token, key } = issueApiKey(scopesOf(values.scope), values.id);
        json({
          event: "key-entry",
          key_id: key.keyId,
          scopes: formatScopes(key.scopes),
          token,
          entry: formatApiKey(key),
        });
        io.err("The token is shown only now: hand it to its holder, and add the entry to DROVER_API_KEYS.");
        return 0;
      }
      case "new-secret-key": {
        const [keyId] = positionals;
        if (!keyId) throw new UsageError("new-secret-key needs a key id, e.g. new-secret-key 2026-06");
        json({ event: "secret-key", entry: generateSecretKey(keyId) });
        io.err(
          "Put it FIRST in DROVER_SECRET_KEYS on every coordinator and worker, keep the old key after it, restart, then run reencrypt-secrets.",
        );
        return 0;
      }
      case "issue":
      case "revoke":
      case "list":
      case "reencrypt-secrets":
        return await withDatabase(io, (db) =>
          // Who changed the keys, for the audit trail: this command holds no API key of its own.
          STORED_KEY_COMMANDS[command](db, {
            io,
            json,
            values,
            positionals,
            actor: localActor("keys command"),
          }),
        );
      default:
        throw new UsageError(command ? `unknown command "${command}"` : "no command given");
    }
  } catch (err) {
    if (err instanceof UsageError || err instanceof ScopeError || err instanceof ApiKeyError) {
      io.err(`${err.message}\n\n${KEYS_USAGE}`);
      return 2;
    }
    if (err instanceof SecretKeyError) {
      io.err(err.message);
      return 2;
    }
    throw err;
  }
}

/** What a stored-key command is given: the command line, where to write, and who runs it. */
interface StoredKeyCall {
  io: KeysIo;
  json(value: Record<string, unknown>): void;
  values: ReturnType<typeof parse>["values"];
  positionals: string[];
  actor: ReturnType<typeof localActor>;
}

/** The commands that read or change what the database stores; each returns the exit code. */
const STORED_KEY_COMMANDS: Record<
  "issue" | "revoke" | "list" | "reencrypt-secrets",
  (db: Db, call: StoredKeyCall) => Promise<number>
> = {
  async issue(db, { io, json, values, actor }) {
    const { token, key } = issueApiKey(scopesOf(values.scope), values.id);
    try {
      await insertApiKey(db, key, values.note, actor);
    } catch (err) {
      if (pgErrorCode(err) !== "23505") throw err;
      const message = `a key with id "${key.keyId}" already exists; choose another --id`;
      await recordAuditEvent(
        db,
        keyChange(
          KEY_ACTIONS.issue,
          actor,
          key.keyId,
          { scopes: formatScopes(key.scopes) },
          {
            outcome: "ALREADY_EXISTS",
            message,
          },
        ),
      );
      throw new UsageError(message);
    }
    json({ event: "key-issued", key_id: key.keyId, scopes: formatScopes(key.scopes), token });
    io.err("The token is shown only now; only its hash is stored.");
    return 0;
  },
  async revoke(db, { io, json, positionals, actor }) {
    const [keyId] = positionals;
    if (!keyId) throw new UsageError("revoke needs the key id");
    if (!(await revokeApiKey(db, keyId, actor))) {
      const message = `no active stored key "${keyId}" (see \`keys list\`; keys in DROVER_API_KEYS are removed there)`;
      await recordAuditEvent(
        db,
        keyChange(KEY_ACTIONS.revoke, actor, keyId, {}, { outcome: "NOT_FOUND", message }),
      );
      io.err(message);
      return 1;
    }
    json({ event: "key-revoked", key_id: keyId });
    return 0;
  },
  async list(db, { json }) {
    for (const row of await listStoredApiKeys(db)) {
      json({
        key_id: row.keyId,
        scopes: row.scopes.join("+"),
        created_at: row.createdAt.toISOString(),
        revoked_at: row.revokedAt?.toISOString() ?? null,
        note: row.note,
      });
    }
    return 0;
  },
  async "reencrypt-secrets"(db, { io, json }) {
    const { keyring } = loadSecretKeyring(keyringOptions(io.env));
    const result = await reencryptSecrets(db, keyring);
    json({ event: "secrets-reencrypted", key_id: keyring.primaryKeyId, ...result });
    if (result.unreadable > 0) {
      io.err(`${result.unreadable} secret(s) are under keys not configured here and were left as they were.`);
      return 1;
    }
    return 0;
  },
};

class UsageError extends Error {}

function parse(argv: string[]) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      scope: { type: "string", multiple: true },
      id: { type: "string" },
      note: { type: "string" },
    },
  });
  const [command, ...rest] = positionals;
  return { command, values, positionals: rest };
}

function scopesOf(values: string[] | undefined): Scope[] {
  if (!values || values.length === 0)
    throw new UsageError("give at least one --scope (admin, worker, read:<id>, tenant:<id> or revert:<id>)");
  return values.flatMap((v) => v.split("+")).map(parseScope);
}

async function withDatabase(
  io: KeysIo,
  fn: (db: ReturnType<typeof openDatabase>["db"]) => Promise<number>,
): Promise<number> {
  const url = io.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/drover";
  await ensureDatabase(url);
  await migrateDatabase(url);
  const database = openDatabase(url, { max: 2, applicationName: "drover-keys" });
  try {
    return await fn(database.db);
  } finally {
    await database.close();
  }
}
