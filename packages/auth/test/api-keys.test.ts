import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  ApiKeyError,
  ApiKeyring,
  bearer,
  bearerToken,
  formatApiKey,
  hashToken,
  issueApiKey,
  loadApiKeys,
  parseApiKeys,
  parseScopes,
} from "../src/index.js";

describe("api keys", () => {
  it("issues a token whose hash, not the token, is what gets configured, and finds the key by the token", () => {
    const { token, key } = issueApiKey(parseScopes("tenant:acme+tenant:globex"), "acme-ci");
    expect(token).toMatch(/^drv_[A-Za-z0-9_-]{43}$/);
    expect(key.hash).toBe(hashToken(token));
    expect(key.hash).toMatch(/^[0-9a-f]{64}$/);
    const entry = formatApiKey(key);
    expect(entry).toBe(`acme-ci:${key.hash}:tenant:acme+tenant:globex`);
    expect(entry).not.toContain(token);

    const [parsed] = parseApiKeys(entry);
    expect(parsed).toEqual(key);
    const ring = new ApiKeyring([parsed!]);
    expect(ring.find(token)?.keyId).toBe("acme-ci");
    expect(ring.find(`${token}x`)).toBeUndefined();
    expect(ring.find("")).toBeUndefined();
    expect(ring.find("x".repeat(10_000))).toBeUndefined();
  });

  it("parses DROVER_API_KEYS entries: comma-separated, several scopes joined with +, tenant ids holding ':'", () => {
    const a = issueApiKey(parseScopes("admin")).key;
    const w = issueApiKey(parseScopes("worker")).key;
    const text = ` admin-1:${a.hash.toUpperCase()}:admin , w1:${w.hash}:worker+tenant:eu:acme `;
    expect(parseApiKeys(text)).toEqual([
      { keyId: "admin-1", hash: a.hash, scopes: [{ kind: "admin" }] },
      { keyId: "w1", hash: w.hash, scopes: [{ kind: "worker" }, { kind: "tenant", tenantId: "eu:acme" }] },
    ]);
  });

  it("says which entry is wrong and why, without echoing a hash", () => {
    const hash = hashToken("x");
    const cases: [string, RegExp][] = [
      ["justone", /entry 1 is not keyId:sha256hex:scope/],
      [`bad id:${hash}:admin`, /entry 1: the key id must be 1-64/],
      ["k:abc:admin", /entry 1 \(key "k"\): the hash must be the 64 hex digits/],
      [`k:${hash}:root`, /entry 1 \(key "k"\): unknown scope "root"/],
      [`k:${hash}:tenant:`, /names a tenant id that is not/],
      [`k:${hash}:`, /no scope given/],
      [`k:${hash}:admin,k:${hashToken("y")}:worker`, /entry 2 \(key "k"\): the key id is used twice/],
      [`k:${hash}:admin,j:${hash}:worker`, /entry 2 \(key "j"\): the same token hash appears twice/],
    ];
    for (const [text, message] of cases) {
      let error: unknown;
      try {
        parseApiKeys(text);
      } catch (err) {
        error = err;
      }
      expect(error, text).toBeInstanceOf(ApiKeyError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain(hash);
    }
  });

  it("loads from DROVER_API_KEYS or a file (newlines and # comments allowed), never both", () => {
    const dir = mkdtempSync(join(tmpdir(), "drover-api-keys-"));
    try {
      const a = issueApiKey(parseScopes("admin"), "a").key;
      const w = issueApiKey(parseScopes("worker"), "w").key;
      const file = join(dir, "keys");
      writeFileSync(file, `# operators\n${formatApiKey(a)}\n\n# workers\n${formatApiKey(w)}\n`);
      expect(loadApiKeys({ file }).map((k) => k.keyId)).toEqual(["a", "w"]);
      expect(loadApiKeys({ keys: formatApiKey(a) }).map((k) => k.keyId)).toEqual(["a"]);
      expect(loadApiKeys({})).toEqual([]);
      expect(() => loadApiKeys({ keys: formatApiKey(a), file })).toThrow(/set one, not both/);
      expect(() => loadApiKeys({ file: join(dir, "nope") })).toThrow(/DROVER_API_KEYS_FILE: cannot read/);
      expect(() => loadApiKeys({ keys: "k:1:admin" })).toThrow(/^DROVER_API_KEYS: entry 1/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads the bearer token of an authorization value", () => {
    expect(bearer("drv_abc")).toEqual({ authorization: "Bearer drv_abc" });
    expect(bearerToken("Bearer drv_abc")).toBe("drv_abc");
    expect(bearerToken("bearer   drv_abc ")).toBe("drv_abc");
    expect(bearerToken("Basic dXNlcjpwYXNz")).toBeUndefined();
    expect(bearerToken("Bearer")).toBeUndefined();
    expect(bearerToken("Bearer a b")).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});
