import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { formatScopes, type Principal, parseScopes, type Scope, ScopeError } from "./scopes.js";

/**
 * An API key as the server knows it: an id (for people and logs), the SHA-256 of the bearer token,
 * and what the token may do. The token itself is shown once, when the key is issued, and never
 * stored: whoever reads the configuration or the table learns nothing they can call with.
 */
export interface ApiKey {
  keyId: string;
  /** Lowercase hex SHA-256 of the whole token. */
  hash: string;
  scopes: readonly Scope[];
}

export const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Longer than any token we issue; anything longer is refused before it is hashed. */
export const MAX_TOKEN_LENGTH = 512;

export class ApiKeyError extends Error {
  override readonly name = "ApiKeyError";
}

/** A fresh bearer token: 256 random bits, recognisable by its prefix (e.g. to secret scanners). */
export function generateToken(): string {
  return `drv_${randomBytes(32).toString("base64url")}`;
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** A new key: the token to hand out once, and the key (hash only) to configure or store. */
export function issueApiKey(scopes: readonly Scope[], keyId?: string): { token: string; key: ApiKey } {
  const id = keyId ?? `key-${randomBytes(4).toString("hex")}`;
  if (!KEY_ID.test(id)) throw new ApiKeyError(`key id "${id.slice(0, 80)}" ${KEY_ID_RULE}`);
  if (scopes.length === 0) throw new ApiKeyError("a key needs at least one scope");
  const token = generateToken();
  return { token, key: { keyId: id, hash: hashToken(token), scopes: [...scopes] } };
}

const KEY_ID_RULE = "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit";

/** `keyId:sha256hex:scope[+scope]`, the form DROVER_API_KEYS takes. */
export function formatApiKey(key: ApiKey): string {
  return `${key.keyId}:${key.hash}:${formatScopes(key.scopes)}`;
}

/**
 * Parses DROVER_API_KEYS (entries separated by commas) or the file DROVER_API_KEYS_FILE names
 * (commas or newlines; blank lines and lines starting with `#` are ignored). Messages name the entry
 * by position and key id, never echo a hash.
 */
export function parseApiKeys(text: string): ApiKey[] {
  const entries = entriesOf(text);
  const keys: ApiKey[] = [];
  const problems: string[] = [];
  const ids = new Set<string>();
  const hashes = new Set<string>();
  entries.forEach((entry, i) => {
    const where = `entry ${i + 1}`;
    const first = entry.indexOf(":");
    const second = first < 0 ? -1 : entry.indexOf(":", first + 1);
    if (first < 0 || second < 0) {
      problems.push(`${where} is not keyId:sha256hex:scope[+scope]`);
      return;
    }
    const keyId = entry.slice(0, first);
    const hash = entry.slice(first + 1, second).toLowerCase();
    const scopeText = entry.slice(second + 1);
    if (!KEY_ID.test(keyId)) {
      problems.push(`${where}: the key id ${KEY_ID_RULE}`);
      return;
    }
    const named = `${where} (key "${keyId}")`;
    if (!SHA256_HEX.test(hash)) {
      problems.push(
        `${named}: the hash must be the 64 hex digits of the token's SHA-256 (never the token itself)`,
      );
      return;
    }
    let scopes: Scope[];
    try {
      scopes = parseScopes(scopeText);
    } catch (err) {
      problems.push(`${named}: ${err instanceof ScopeError ? err.message : String(err)}`);
      return;
    }
    if (ids.has(keyId)) problems.push(`${named}: the key id is used twice`);
    else if (hashes.has(hash)) problems.push(`${named}: the same token hash appears twice`);
    ids.add(keyId);
    hashes.add(hash);
    keys.push({ keyId, hash, scopes });
  });
  if (problems.length > 0) throw new ApiKeyError(problems.join("; "));
  return keys;
}

/** Keys looked up by the hash of a presented token. */
export class ApiKeyring {
  private readonly byHash: Map<string, ApiKey>;

  constructor(keys: Iterable<ApiKey>) {
    this.byHash = new Map([...keys].map((k) => [k.hash, k]));
  }

  get size(): number {
    return this.byHash.size;
  }

  keys(): ApiKey[] {
    return [...this.byHash.values()];
  }

  /**
   * The key a token belongs to. Looked up by the token's SHA-256, so comparing never touches the
   * token's own bytes, and timing reveals nothing useful about a stored key.
   */
  find(token: string): ApiKey | undefined {
    if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) return undefined;
    return this.byHash.get(hashToken(token));
  }
}

export function principalOf(key: ApiKey): Principal {
  return { keyId: key.keyId, scopes: key.scopes };
}

/** The metadata a client sends: `authorization: Bearer <token>`. */
export function bearer(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}

/** The token of an `authorization: Bearer <token>` value, or undefined when it is not one. */
export function bearerToken(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
  return match?.[1];
}

/**
 * The keys configured in the environment: DROVER_API_KEYS, or the file DROVER_API_KEYS_FILE names.
 * Setting both is refused (which one would win is a surprise either way). Throws ApiKeyError
 * naming the variable.
 */
export function loadApiKeys(source: { keys?: string | undefined; file?: string | undefined }): ApiKey[] {
  const inline = source.keys?.trim();
  const file = source.file?.trim();
  if (inline && file) throw new ApiKeyError("DROVER_API_KEYS and DROVER_API_KEYS_FILE: set one, not both");
  if (inline) return withVariable("DROVER_API_KEYS", () => parseApiKeys(inline));
  if (!file) return [];
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ApiKeyError(
      `DROVER_API_KEYS_FILE: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? "error"})`,
    );
  }
  return withVariable("DROVER_API_KEYS_FILE", () => parseApiKeys(text));
}

function withVariable(name: string, parse: () => ApiKey[]): ApiKey[] {
  try {
    return parse();
  } catch (err) {
    throw new ApiKeyError(`${name}: ${(err as Error).message}`);
  }
}

/** Entries separated by commas or newlines; blank lines and lines starting with `#` are ignored. */
export function entriesOf(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => !line.trim().startsWith("#"))
    .flatMap((line) => line.split(","))
    .map((e) => e.trim())
    .filter((e) => e !== "");
}
