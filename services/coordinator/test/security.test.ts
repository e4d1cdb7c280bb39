import { randomUUID } from "node:crypto";
import {
  formatApiKey,
  generateSecretKey,
  issueApiKey,
  parseApiKeys,
  parseSecretKeys,
  SecretKeyring,
} from "@drover/auth";
import { ConfigError } from "@drover/config";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { sourceSecretContext } from "@drover/engine";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiKeyAuthenticator, ensureDevKeys, insertApiKey, revokeApiKey } from "../src/api-key-store.js";
import { loadCoordinatorConfig } from "../src/config.js";
import { keysCommand } from "../src/keys-command.js";
import { reencryptSecrets, sealLegacySecrets, sealSourceSecret } from "../src/source-secrets.js";

const OLD = generateSecretKey("old");
const NEW = generateSecretKey("new");

function problems(env: Record<string, string>): string {
  try {
    loadCoordinatorConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("coordinator security configuration", () => {
  it("names each bad key, secret or TLS variable, and never quotes key material", () => {
    const material = OLD.split(":")[1]!;
    const message = problems({
      DROVER_SECRET_KEYS: `k1:${material.slice(0, 20)},${OLD}`,
      DROVER_API_KEYS: "ops:1234:admin",
      DROVER_TLS_CERT_FILE: "/nonexistent/cert.pem",
      DROVER_LANE_WIDTH: "0",
    });
    expect(message).toMatch(/DROVER_LANE_WIDTH: must be at least 1/);
    expect(message).toMatch(/DROVER_SECRET_KEYS: entry 1 \(key "k1"\): the key must be 32 random bytes/);
    expect(message).toMatch(/DROVER_API_KEYS: entry 1 \(key "ops"\): the hash must be the 64 hex digits/);
    expect(message).toMatch(/DROVER_TLS_CERT_FILE and DROVER_TLS_KEY_FILE go together/);
    expect(message).toMatch(/DROVER_TLS_CERT_FILE: cannot read \/nonexistent\/cert.pem/);
    expect(message).not.toContain(material.slice(0, 20));
    expect(message).not.toContain("1234");
  });

  it("refuses two sources for one set of keys, and the development keyring in production", () => {
    expect(problems({ DROVER_API_KEYS: "a:b:admin", DROVER_API_KEYS_FILE: "/x" })).toMatch(
      /set one, not both/,
    );
    expect(problems({ NODE_ENV: "production" })).toMatch(
      /DROVER_SECRET_KEYS: required when NODE_ENV=production/,
    );
    const { key } = issueApiKey([{ kind: "admin" }], "ops");
    const config = loadCoordinatorConfig({
      DROVER_API_KEYS: formatApiKey(key),
      DROVER_SECRET_KEYS: `${NEW},${OLD}`,
    });
    expect(parseApiKeys(config.apiKeys.keys!)).toEqual([key]);
  });
});

describe("keys and secrets in the database", () => {
  let testDb: TestDatabase;
  let database: ReturnType<typeof openDatabase>;
  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = openDatabase(testDb.url, { max: 2 });
  });
  afterAll(async () => {
    await database?.close();
    await testDb?.drop();
  });

  async function insertRun(columns: {
    sourceSecret?: string;
    sealed?: { keyId: string; ciphertext: string };
    id?: string;
  }) {
    const id = columns.id ?? randomUUID();
    await database.db.execute(sql`
      insert into drover.runs (id, tenant_id, source, source_account, kinds, plan, status, source_secret,
                               source_secret_ciphertext, source_secret_key_id)
      values (${id}::uuid, ${`t-${id.slice(0, 8)}`}, 'crm', 'acct', '{organizations}', '[["organizations"]]', 'stopped',
              ${columns.sourceSecret ?? null}, ${columns.sealed?.ciphertext ?? null}, ${columns.sealed?.keyId ?? null})`);
    return id;
  }
  async function secretColumns(id: string) {
    const [row] = await database.db.execute<{
      source_secret: string | null;
      ciphertext: string;
      key_id: string;
    }>(sql`
      select source_secret, source_secret_ciphertext as ciphertext, source_secret_key_id as key_id
        from drover.runs where id = ${id}::uuid`);
    return row!;
  }

  it("seals plaintext secrets left by earlier versions, and clears them", async () => {
    const keyring = new SecretKeyring(parseSecretKeys(OLD));
    const id = await insertRun({ sourceSecret: "legacy-plaintext" });
    expect(await sealLegacySecrets(database.db, keyring)).toBe(1);
    expect(await sealLegacySecrets(database.db, keyring)).toBe(0);
    const row = await secretColumns(id);
    expect(row.source_secret).toBeNull();
    expect(row.key_id).toBe("old");
    expect(keyring.open({ keyId: row.key_id, ciphertext: row.ciphertext }, sourceSecretContext(id))).toBe(
      "legacy-plaintext",
    );
  });

  it("rotates: reencrypt-secrets moves every secret to the first key, leaving those it cannot open", async () => {
    const old = new SecretKeyring(parseSecretKeys(OLD));
    const a = randomUUID();
    const b = randomUUID();
    await insertRun({ id: a, sealed: sealSourceSecret(old, a, "secret-a") });
    await insertRun({ id: b, sealed: sealSourceSecret(old, b, "secret-b") });
    const stranger = randomUUID();
    await insertRun({
      id: stranger,
      sealed: sealSourceSecret(
        new SecretKeyring(parseSecretKeys(generateSecretKey("gone"))),
        stranger,
        "lost",
      ),
    });

    const lines: string[] = [];
    const io = {
      env: { DATABASE_URL: testDb.url, DROVER_SECRET_KEYS: `${NEW},${OLD}` },
      out: (l: string) => lines.push(l),
      err: () => {},
    };
    expect(await keysCommand(["reencrypt-secrets"], io)).toBe(1); // one is under a key not configured
    expect(JSON.parse(lines.pop()!)).toMatchObject({
      event: "secrets-reencrypted",
      key_id: "new",
      unreadable: 1,
    });

    const rotated = new SecretKeyring(parseSecretKeys(NEW)); // the old key can go now
    for (const [id, secret] of [
      [a, "secret-a"],
      [b, "secret-b"],
    ] as const) {
      const row = await secretColumns(id);
      expect(row.key_id).toBe("new");
      expect(rotated.open({ keyId: row.key_id, ciphertext: row.ciphertext }, sourceSecretContext(id))).toBe(
        secret,
      );
    }
    expect((await secretColumns(stranger)).key_id).toBe("gone");
    expect(await reencryptSecrets(database.db, new SecretKeyring(parseSecretKeys(`${NEW},${OLD}`)))).toEqual({
      reencrypted: 0,
      unreadable: 1,
    });
  });

  it("the database refuses a ciphertext without its key id", async () => {
    await expect(
      database.db.execute(sql`
        insert into drover.runs (tenant_id, source, source_account, kinds, plan, source_secret_ciphertext)
        values ('t', 'crm', 'a', '{x}', '[["x"]]', 'abc')`),
    ).rejects.toThrow();
  });

  it("authenticates configured and stored keys; a revoked key stops working at the next refresh", async () => {
    const configured = issueApiKey([{ kind: "worker" }], "conf-worker");
    const stored = issueApiKey([{ kind: "tenant", tenantId: "acme" }], "stored-acme");
    await insertApiKey(database.db, stored.key, "test", "test");
    const auth = new ApiKeyAuthenticator(database.db, [configured.key], { refreshMs: 60_000 });
    expect(await auth.authenticate(configured.token)).toEqual({
      keyId: "conf-worker",
      scopes: [{ kind: "worker" }],
    });
    expect(await auth.authenticate(stored.token)).toEqual({
      keyId: "stored-acme",
      scopes: [{ kind: "tenant", tenantId: "acme" }],
    });
    expect(await auth.authenticate("drv_nobody")).toBeUndefined();
    expect(await revokeApiKey(database.db, "stored-acme", "test")).toBe(true);
    expect(await auth.authenticate(stored.token)).toBeDefined(); // until the next refresh
    await auth.refresh();
    expect(await auth.authenticate(stored.token)).toBeUndefined();
    // Keys exist (even revoked ones): no development keys are generated any more.
    expect(await ensureDevKeys(database.db, 0)).toBeUndefined();
  });

  it("the keys command issues, lists and makes entries without ever storing a token", async () => {
    const lines: string[] = [];
    const errors: string[] = [];
    const io = {
      env: { DATABASE_URL: testDb.url },
      out: (l: string) => lines.push(l),
      err: (l: string) => errors.push(l),
    };
    expect(await keysCommand(["issue", "--scope", "admin", "--id", "ops-1"], io)).toBe(0);
    const issued = JSON.parse(lines.pop()!) as { token: string };
    expect(await keysCommand(["issue", "--scope", "admin", "--id", "ops-1"], io)).toBe(2);
    expect(errors.pop()).toMatch(/already exists/);
    // Both are in the audit trail, the refused one with its reason; neither names a token.
    const audited = await database.db.execute<{ action: string; outcome: string; message: string | null }>(
      sql`select action, outcome, message from drover.audit_events where details->>'key_id' = 'ops-1' order by id`,
    );
    expect(audited.map((r) => [r.action, r.outcome])).toEqual([
      ["IssueApiKey", "ok"],
      ["IssueApiKey", "ALREADY_EXISTS"],
    ]);
    expect(audited[1]!.message).toMatch(/a key with id "ops-1" already exists/);
    expect(JSON.stringify([...audited])).not.toContain(issued.token);

    expect(await keysCommand(["list"], io)).toBe(0);
    const listed = lines.splice(0).map((l) => JSON.parse(l) as { key_id: string; revoked_at: string | null });
    expect(listed.find((k) => k.key_id === "ops-1")).toMatchObject({ scopes: "admin", revoked_at: null });
    expect(JSON.stringify(listed)).not.toContain(issued.token);
    const [dumped] = await database.db.execute<{ dump: string }>(
      sql`select string_agg(k::text, ' ') as dump from drover.api_keys k`,
    );
    expect(dumped!.dump).not.toContain(issued.token);

    expect(
      await keysCommand(["entry", "--scope", "worker", "--scope", "tenant:acme", "--id", "ci"], io),
    ).toBe(0);
    const entry = JSON.parse(lines.pop()!) as { token: string; entry: string };
    const [parsed] = parseApiKeys(entry.entry);
    expect(parsed!.keyId).toBe("ci");
    expect(parsed!.scopes).toEqual([{ kind: "worker" }, { kind: "tenant", tenantId: "acme" }]);
    expect(entry.entry).not.toContain(entry.token);

    expect(await keysCommand(["new-secret-key", "2026-06"], io)).toBe(0);
    const secretEntry = (JSON.parse(lines.pop()!) as { entry: string }).entry;
    expect(parseSecretKeys(secretEntry)[0]!.keyId).toBe("2026-06");

    expect(await keysCommand([], io)).toBe(2);
    expect(await keysCommand(["frobnicate"], io)).toBe(2);
    expect(await keysCommand(["issue"], io)).toBe(2);
  });
});
