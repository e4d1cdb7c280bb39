import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { entriesOf, KEY_ID } from "./api-keys.js";

/**
 * Secrets at rest (a customer's source API token): AES-256-GCM under a keyring. The first key
 * encrypts; every configured key decrypts, so keys rotate without downtime: put a new key first,
 * restart, re-encrypt what is stored, then drop the old key. The key id is stored next to each
 * ciphertext, so a reader knows which key to use and says which one is missing.
 */
export interface SecretKey {
  keyId: string;
  /** 32 bytes. */
  key: Buffer;
}

export interface SealedSecret {
  keyId: string;
  /** base64 of version (1 byte) | IV (12) | GCM tag (16) | ciphertext. */
  ciphertext: string;
}

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

export class SecretKeyError extends Error {
  override readonly name = "SecretKeyError";
}

/** The ciphertext's key id is not in this keyring: configuration, not data, is wrong. */
export class SecretKeyMissingError extends Error {
  override readonly name = "SecretKeyMissingError";
}

/** The ciphertext does not authenticate under its key: altered, truncated, or moved to another record. */
export class SecretTamperedError extends Error {
  override readonly name = "SecretTamperedError";
}

export class SecretKeyring {
  private readonly byId: Map<string, Buffer>;
  private readonly primary: SecretKey;

  constructor(keys: readonly SecretKey[]) {
    if (keys.length === 0) throw new SecretKeyError("a keyring needs at least one key");
    for (const k of keys) {
      if (k.key.length !== KEY_BYTES) throw new SecretKeyError(`key "${k.keyId}" is not ${KEY_BYTES} bytes`);
    }
    this.primary = keys[0]!;
    this.byId = new Map(keys.map((k) => [k.keyId, k.key]));
  }

  /** The id of the key new secrets are encrypted with. */
  get primaryKeyId(): string {
    return this.primary.keyId;
  }

  get keyIds(): string[] {
    return [...this.byId.keys()];
  }

  /**
   * Encrypts under the primary key. `context` is bound as associated data (e.g. the run id): the
   * ciphertext only opens for the record it was sealed for, so copying it onto another row fails.
   */
  seal(plaintext: string, context: string): SealedSecret {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.primary.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(context, "utf8"));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    const out = Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
    return { keyId: this.primary.keyId, ciphertext: out.toString("base64") };
  }

  open(sealed: SealedSecret, context: string): string {
    const key = this.byId.get(sealed.keyId);
    if (!key) {
      throw new SecretKeyMissingError(
        `the secret was encrypted with key "${sealed.keyId.slice(0, 64)}", which is not configured here (configured: ${this.keyIds.join(", ")}); add it to DROVER_SECRET_KEYS`,
      );
    }
    const raw = Buffer.from(sealed.ciphertext, "base64");
    if (raw.length < 1 + IV_BYTES + TAG_BYTES || raw[0] !== VERSION) {
      throw new SecretTamperedError("the stored secret is not a ciphertext this version wrote");
    }
    const iv = raw.subarray(1, 1 + IV_BYTES);
    const tag = raw.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
    const body = raw.subarray(1 + IV_BYTES + TAG_BYTES);
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(context, "utf8"));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8");
    } catch {
      // Never the cause: it says nothing useful, and nothing secret may ride along.
      throw new SecretTamperedError(
        `the stored secret does not authenticate under key "${sealed.keyId.slice(0, 64)}": it was altered or belongs to another record`,
      );
    }
  }

  /** True when `sealed` is not under the primary key (a rotation left it behind). */
  isStale(sealed: Pick<SealedSecret, "keyId">): boolean {
    return sealed.keyId !== this.primary.keyId;
  }
}

/** A new `keyId:base64key` entry for DROVER_SECRET_KEYS. */
export function generateSecretKey(keyId: string): string {
  if (!KEY_ID.test(keyId)) throw new SecretKeyError(`key id "${keyId.slice(0, 64)}" is not a valid key id`);
  return `${keyId}:${randomBytes(KEY_BYTES).toString("base64")}`;
}

/**
 * Parses `keyId:base64key[,keyId:base64key...]` (commas or newlines; `#` lines ignored). Messages
 * name the entry and its key id, and never echo key material.
 */
export function parseSecretKeys(text: string): SecretKey[] {
  const entries = entriesOf(text);
  if (entries.length === 0) throw new SecretKeyError("no key given; expected keyId:base64key[,...]");
  const problems: string[] = [];
  const keys: SecretKey[] = [];
  entries.forEach((entry, i) => {
    const colon = entry.indexOf(":");
    const keyId = colon < 0 ? "" : entry.slice(0, colon);
    if (colon < 0 || !KEY_ID.test(keyId)) {
      problems.push(
        `entry ${i + 1} is not keyId:base64key (the key id is 1-64 letters, digits, '_', '.' or '-')`,
      );
      return;
    }
    const material = entry.slice(colon + 1);
    const key = /^[A-Za-z0-9+/]+={0,2}$/.test(material) ? Buffer.from(material, "base64") : Buffer.alloc(0);
    if (key.length !== KEY_BYTES) {
      problems.push(
        `entry ${i + 1} (key "${keyId}"): the key must be ${KEY_BYTES} random bytes in base64 (44 characters), e.g. from \`openssl rand -base64 32\``,
      );
      return;
    }
    if (keys.some((k) => k.keyId === keyId)) {
      problems.push(`entry ${i + 1} (key "${keyId}"): the key id is used twice`);
      return;
    }
    keys.push({ keyId, key });
  });
  if (problems.length > 0) throw new SecretKeyError(problems.join("; "));
  return keys;
}

/** Where a development keyring is kept when no key is configured: `.artifacts/` at the repository root. */
export const DEV_SECRET_KEYS_FILE = fileURLToPath(
  new URL("../../../.artifacts/dev-secret-keys", import.meta.url),
);

export interface SecretKeyringSource {
  /** DROVER_SECRET_KEYS. */
  keys?: string | undefined;
  /** DROVER_SECRET_KEYS_FILE: a file holding the same entries (e.g. a mounted secret). */
  file?: string | undefined;
  /** Refuse the development keyring (NODE_ENV=production). */
  production?: boolean;
  /** Defaults to DEV_SECRET_KEYS_FILE. */
  devFile?: string;
}

/**
 * The keyring from DROVER_SECRET_KEYS or DROVER_SECRET_KEYS_FILE (not both), else (outside production)
 * a development keyring generated once into `.artifacts/dev-secret-keys` (mode 0600) and shared by
 * every service started from this checkout. Throws SecretKeyError with a message fit for a person.
 */
export function loadSecretKeyring(source: SecretKeyringSource): {
  keyring: SecretKeyring;
  origin: "env" | "file" | "dev";
} {
  if (source.keys?.trim() && source.file?.trim()) {
    throw new SecretKeyError("DROVER_SECRET_KEYS and DROVER_SECRET_KEYS_FILE: set one, not both");
  }
  if (source.keys?.trim()) {
    return { keyring: new SecretKeyring(withContext("DROVER_SECRET_KEYS", source.keys)), origin: "env" };
  }
  if (source.file?.trim()) {
    const text = readKeyFile("DROVER_SECRET_KEYS_FILE", source.file);
    return { keyring: new SecretKeyring(withContext("DROVER_SECRET_KEYS_FILE", text)), origin: "file" };
  }
  if (source.production) {
    throw new SecretKeyError(
      "DROVER_SECRET_KEYS: required when NODE_ENV=production (keyId:base64key, e.g. main:$(openssl rand -base64 32)); the development keyring is refused",
    );
  }
  const devFile = source.devFile ?? DEV_SECRET_KEYS_FILE;
  return { keyring: new SecretKeyring(withContext(devFile, ensureDevKeyFile(devFile))), origin: "dev" };
}

function withContext(what: string, text: string): SecretKey[] {
  try {
    return parseSecretKeys(text);
  } catch (err) {
    throw new SecretKeyError(`${what}: ${(err as Error).message}`);
  }
}

function readKeyFile(what: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new SecretKeyError(
      `${what}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
}

/** Creates the development key file once; concurrent starters all end up reading the same key. */
function ensureDevKeyFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new SecretKeyError(
        `cannot read the development keyring ${path}: ${(err as NodeJS.ErrnoException).code}`,
      );
    }
  }
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}`;
  writeFileSync(
    tmp,
    `# Development keyring for source secrets, generated ${new Date().toISOString()}. Not for production.\n${generateSecretKey("dev")}\n`,
    { mode: 0o600 },
  );
  try {
    // link() fails if the file exists: exactly one starter's key wins, and it is complete when visible.
    linkSync(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    unlinkSync(tmp);
  }
  return readFileSync(path, "utf8");
}

/**
 * What is wrong with the secret-key variables, as a list of problems for a start-up ConfigError.
 * Only configured keys are checked (and any in production): the development keyring is made or
 * read at start, not here.
 */
export function secretKeyProblems(env: NodeJS.ProcessEnv): string[] {
  const production = env.NODE_ENV === "production";
  if (!env.DROVER_SECRET_KEYS?.trim() && !env.DROVER_SECRET_KEYS_FILE?.trim() && !production) return [];
  try {
    loadSecretKeyring({ keys: env.DROVER_SECRET_KEYS, file: env.DROVER_SECRET_KEYS_FILE, production });
    return [];
  } catch (err) {
    if (!(err instanceof SecretKeyError)) throw err;
    return [err.message];
  }
}
