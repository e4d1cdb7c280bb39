import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  generateSecretKey,
  loadSecretKeyring,
  parseSecretKeys,
  SecretKeyError,
  SecretKeyMissingError,
  SecretKeyring,
  SecretTamperedError,
} from "../src/index.js";

const TOKEN = "tok-secret-box-Ünïcode-✓";
const keyring = (text: string) => new SecretKeyring(parseSecretKeys(text));

describe("secret box", () => {
  const k1 = generateSecretKey("k1");
  const k2 = generateSecretKey("k2");

  it("round-trips, with a fresh IV each time and the key id alongside", () => {
    const ring = keyring(k1);
    const a = ring.seal(TOKEN, "run-1");
    const b = ring.seal(TOKEN, "run-1");
    expect(a.keyId).toBe("k1");
    expect(a.ciphertext).not.toBe(b.ciphertext);
    expect(a.ciphertext).not.toContain(TOKEN);
    expect(Buffer.from(a.ciphertext, "base64").toString("latin1")).not.toContain("tok-secret");
    expect(ring.open(a, "run-1")).toBe(TOKEN);
    expect(ring.open(b, "run-1")).toBe(TOKEN);
  });

  it("rotates: the new first key encrypts, the old one still decrypts what it sealed", () => {
    const old = keyring(k1).seal(TOKEN, "run-1");
    const rotated = keyring(`${k2},${k1}`);
    expect(rotated.primaryKeyId).toBe("k2");
    expect(rotated.open(old, "run-1")).toBe(TOKEN);
    expect(rotated.isStale(old)).toBe(true);
    const fresh = rotated.seal(TOKEN, "run-1");
    expect(fresh.keyId).toBe("k2");
    expect(rotated.isStale(fresh)).toBe(false);
    // Once k1 is dropped, what k2 sealed still opens; what k1 sealed says which key is missing.
    const afterwards = keyring(k2);
    expect(afterwards.open(fresh, "run-1")).toBe(TOKEN);
    expect(() => afterwards.open(old, "run-1")).toThrow(SecretKeyMissingError);
    expect(() => afterwards.open(old, "run-1")).toThrow(/key "k1".*DROVER_SECRET_KEYS/);
  });

  it("refuses a tampered ciphertext, a swapped tag, another record's context and another key of the same id", () => {
    const ring = keyring(k1);
    const sealed = ring.seal(TOKEN, "run-1");
    const raw = Buffer.from(sealed.ciphertext, "base64");
    const flip = (at: number) => {
      const copy = Buffer.from(raw);
      copy[at] = copy[at]! ^ 0x01;
      return { keyId: "k1", ciphertext: copy.toString("base64") };
    };
    expect(() => ring.open(flip(raw.length - 1), "run-1")).toThrow(SecretTamperedError); // body
    expect(() => ring.open(flip(20), "run-1")).toThrow(SecretTamperedError); // tag
    expect(() => ring.open(flip(5), "run-1")).toThrow(SecretTamperedError); // IV
    expect(() => ring.open(flip(0), "run-1")).toThrow(SecretTamperedError); // version
    expect(() =>
      ring.open({ keyId: "k1", ciphertext: raw.subarray(0, 20).toString("base64") }, "run-1"),
    ).toThrow(SecretTamperedError);
    expect(() => ring.open(sealed, "run-2")).toThrow(SecretTamperedError);
    expect(() => keyring(generateSecretKey("k1")).open(sealed, "run-1")).toThrow(SecretTamperedError);
    try {
      ring.open(flip(raw.length - 1), "run-1");
    } catch (err) {
      expect((err as Error).message).not.toContain(TOKEN);
      expect((err as Error).cause).toBeUndefined();
    }
  });

  it("says what is wrong with a malformed DROVER_SECRET_KEYS without echoing key material", () => {
    const material = "c2hvcnQ="; // "short"
    const cases: [string, RegExp][] = [
      ["", /no key given/],
      ["nocolon", /entry 1 is not keyId:base64key/],
      [`bad id!:${material}`, /entry 1 is not keyId:base64key/],
      [`k1:${material}`, /entry 1 \(key "k1"\): the key must be 32 random bytes/],
      [`k1:not base64 at all!!`, /the key must be 32 random bytes/],
      [
        `${k1},${k1.replace(/:.*/, ":")}${k2.split(":")[1]}`,
        /entry 2 \(key "k1"\): the key id is used twice/,
      ],
    ];
    for (const [text, message] of cases) {
      let error: unknown;
      try {
        parseSecretKeys(text);
      } catch (err) {
        error = err;
      }
      expect(error, text).toBeInstanceOf(SecretKeyError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain(material);
      expect((error as Error).message).not.toContain(k2.split(":")[1]);
    }
    expect(() => loadSecretKeyring({ keys: `k1:${material}` })).toThrow(/^DROVER_SECRET_KEYS: entry 1/);
  });

  describe("loading", () => {
    const dir = mkdtempSync(join(tmpdir(), "drover-secret-keys-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("reads DROVER_SECRET_KEYS or DROVER_SECRET_KEYS_FILE (not both), and refuses the dev keyring in production", () => {
      const file = join(dir, "keys");
      writeFileSync(file, `# mounted secret\n${k2}\n${k1}\n`);
      expect(loadSecretKeyring({ keys: k1 }).keyring.primaryKeyId).toBe("k1");
      expect(() => loadSecretKeyring({ keys: k1, file })).toThrow(/set one, not both/);
      const fromFile = loadSecretKeyring({ file });
      expect(fromFile.origin).toBe("file");
      expect(fromFile.keyring.keyIds).toEqual(["k2", "k1"]);
      expect(() => loadSecretKeyring({ file: join(dir, "missing") })).toThrow(/cannot read .*ENOENT/);
      expect(() => loadSecretKeyring({ production: true })).toThrow(/required when NODE_ENV=production/);
    });

    it("generates the development keyring once, private to its owner, and every later start reads the same", () => {
      const devFile = join(dir, "nested", "dev-secret-keys");
      const first = loadSecretKeyring({ devFile });
      expect(first.origin).toBe("dev");
      expect(statSync(devFile).mode & 0o777).toBe(0o600);
      const sealed = first.keyring.seal(TOKEN, "x");
      const again = Array.from({ length: 5 }, () => loadSecretKeyring({ devFile }).keyring);
      for (const ring of again) expect(ring.open(sealed, "x")).toBe(TOKEN);
      expect(readFileSync(devFile, "utf8")).toMatch(/^# Development keyring/);
    });
  });
});
