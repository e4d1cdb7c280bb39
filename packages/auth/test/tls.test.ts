import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { clientTlsProblems, isServerTls, serverTlsProblems } from "../src/index.js";

const dir = mkdtempSync(join(tmpdir(), "drover-tls-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string) => {
  const path = join(dir, name);
  writeFileSync(path, "-----BEGIN CERTIFICATE-----\n");
  return path;
};

describe("TLS configuration", () => {
  it("is plaintext with nothing set, TLS with a certificate and key, and says what is missing otherwise", () => {
    expect(serverTlsProblems({})).toEqual([]);
    expect(isServerTls({})).toBe(false);
    const cert = file("cert.pem");
    const key = file("key.pem");
    expect(serverTlsProblems({ certFile: cert, keyFile: key, clientCaFile: file("ca.pem") })).toEqual([]);
    expect(isServerTls({ certFile: cert, keyFile: key })).toBe(true);
    expect(serverTlsProblems({ certFile: cert })).toEqual([
      expect.stringMatching(/DROVER_TLS_CERT_FILE and DROVER_TLS_KEY_FILE go together/),
    ]);
    expect(serverTlsProblems({ clientCaFile: file("ca2.pem") })).toEqual([
      expect.stringMatching(/mutual TLS\) needs DROVER_TLS_CERT_FILE/),
    ]);
    expect(serverTlsProblems({ certFile: join(dir, "nope"), keyFile: key })).toEqual([
      expect.stringMatching(/DROVER_TLS_CERT_FILE: cannot read .*nope \(ENOENT\)/),
    ]);
    expect(clientTlsProblems({ caFile: cert })).toEqual([]);
    expect(clientTlsProblems({ keyFile: key })).toEqual([
      expect.stringMatching(/DROVER_TLS_CLIENT_CERT_FILE and DROVER_TLS_CLIENT_KEY_FILE go together/),
    ]);
  });
});
