import { readFileSync } from "node:fs";
import { type ChannelCredentials, credentials, ServerCredentials } from "@grpc/grpc-js";

/**
 * Transport security from PEM files named in the environment. Nothing configured means plaintext
 * (local development); a certificate and key mean TLS; a client CA as well means mutual TLS, where
 * the server refuses any client without a certificate that CA signed. Bearer tokens are still
 * required on top: TLS says which machine, the token says which caller.
 */
export interface ServerTlsFiles {
  /** DROVER_TLS_CERT_FILE: the server's certificate chain (PEM). */
  certFile?: string | undefined;
  /** DROVER_TLS_KEY_FILE: its private key (PEM). */
  keyFile?: string | undefined;
  /** DROVER_TLS_CLIENT_CA_FILE: require client certificates signed by this CA (mutual TLS). */
  clientCaFile?: string | undefined;
}

export interface ClientTlsFiles {
  /** DROVER_TLS_CA_FILE: the CA that signed the server's certificate (PEM). */
  caFile?: string | undefined;
  /** DROVER_TLS_CLIENT_CERT_FILE / DROVER_TLS_CLIENT_KEY_FILE: this client's certificate, for mutual TLS. */
  certFile?: string | undefined;
  keyFile?: string | undefined;
}

export class TlsConfigError extends Error {
  override readonly name = "TlsConfigError";
}

/** What is wrong with the server's TLS variables, one line each; empty when they are usable. */
export function serverTlsProblems(files: ServerTlsFiles): string[] {
  const problems: string[] = [];
  if (Boolean(files.certFile) !== Boolean(files.keyFile)) {
    problems.push("DROVER_TLS_CERT_FILE and DROVER_TLS_KEY_FILE go together: set both for TLS, or neither");
  }
  if (files.clientCaFile && !files.certFile) {
    problems.push(
      "DROVER_TLS_CLIENT_CA_FILE (mutual TLS) needs DROVER_TLS_CERT_FILE and DROVER_TLS_KEY_FILE too",
    );
  }
  problems.push(
    ...unreadable([
      ["DROVER_TLS_CERT_FILE", files.certFile],
      ["DROVER_TLS_KEY_FILE", files.keyFile],
      ["DROVER_TLS_CLIENT_CA_FILE", files.clientCaFile],
    ]),
  );
  return problems;
}

export function clientTlsProblems(files: ClientTlsFiles): string[] {
  const problems: string[] = [];
  if (Boolean(files.certFile) !== Boolean(files.keyFile)) {
    problems.push(
      "DROVER_TLS_CLIENT_CERT_FILE and DROVER_TLS_CLIENT_KEY_FILE go together: set both for mutual TLS, or neither",
    );
  }
  problems.push(
    ...unreadable([
      ["DROVER_TLS_CA_FILE", files.caFile],
      ["DROVER_TLS_CLIENT_CERT_FILE", files.certFile],
      ["DROVER_TLS_CLIENT_KEY_FILE", files.keyFile],
    ]),
  );
  return problems;
}

export function isServerTls(files: ServerTlsFiles): boolean {
  return Boolean(files.certFile && files.keyFile);
}

export function serverCredentials(files: ServerTlsFiles): ServerCredentials {
  if (!isServerTls(files)) return ServerCredentials.createInsecure();
  const clientCa = files.clientCaFile ? read(files.clientCaFile) : null;
  return ServerCredentials.createSsl(
    clientCa,
    [{ cert_chain: read(files.certFile!), private_key: read(files.keyFile!) }],
    // With a client CA: refuse any client that presents no certificate, or one that CA did not sign.
    clientCa !== null,
  );
}

/**
 * TLS when a CA or a client certificate is configured, or `tls` says so (then without a CA file the
 * system's roots are trusted); plaintext otherwise.
 */
export function channelCredentials(
  files: ClientTlsFiles,
  options: { tls?: boolean } = {},
): ChannelCredentials {
  const tls = options.tls ?? Boolean(files.caFile || files.certFile);
  if (!tls) return credentials.createInsecure();
  return credentials.createSsl(
    files.caFile ? read(files.caFile) : null,
    files.keyFile ? read(files.keyFile) : null,
    files.certFile ? read(files.certFile) : null,
  );
}

function read(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new TlsConfigError(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
}

function unreadable(files: [string, string | undefined][]): string[] {
  const out: string[] = [];
  for (const [name, path] of files) {
    if (!path) continue;
    try {
      readFileSync(path);
    } catch (err) {
      out.push(`${name}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
    }
  }
  return out;
}
