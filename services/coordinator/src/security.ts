import {
  type ApiKey,
  channelCredentials,
  isServerTls,
  loadApiKeys,
  loadSecretKeyring,
  type SecretKeyring,
  serverCredentials,
} from "@drover/auth";
import type { Db } from "@drover/db";
import type { ClientOptions, StartServerOptions } from "@drover/proto";
import type { Logger } from "@drover/telemetry";
import { ApiKeyAuthenticator, type DevKeys, ensureDevKeys, storedApiKeys } from "./api-key-store.js";
import type { CoordinatorConfig } from "./config.js";
import { sealLegacySecrets } from "./source-secrets.js";

export interface Security {
  authenticator: ApiKeyAuthenticator;
  /** Seals source secrets (the first key) and opens them (every key). */
  secrets: SecretKeyring;
  /** Present once, at the very first start of a deployment without keys. */
  devKeys?: DevKeys;
  serverCredentials: NonNullable<StartServerOptions["credentials"]>;
  /** For calls to other coordinators (budget calls forwarded to the leader). */
  clientCredentials: NonNullable<ClientOptions["credentials"]>;
}

/**
 * Keys, secrets and transport, settled before the server listens: the configured API keys, the
 * stored ones (and the development pair at a first start), the secret keyring (with plaintext
 * credentials of older runs sealed under it), and TLS.
 */
export async function prepareSecurity(config: CoordinatorConfig, db: Db, logger: Logger): Promise<Security> {
  const configured: ApiKey[] = loadApiKeys({
    keys: config.apiKeys.keys,
    file: config.apiKeys.file,
  });
  const { production } = config.keyring;
  const { keyring: secrets, origin } = loadSecretKeyring(config.keyring);
  if (origin === "dev") {
    logger.warn(
      "no DROVER_SECRET_KEYS: source secrets are encrypted with the development keyring in .artifacts/",
    );
  }

  let devKeys: DevKeys | undefined;
  if (configured.length === 0 && production) {
    if ((await storedApiKeys(db)).length === 0) {
      throw new Error(
        "no API keys: set DROVER_API_KEYS (or DROVER_API_KEYS_FILE), or issue one with `pnpm --filter @drover/coordinator keys issue --scope admin`; development keys are not generated when NODE_ENV=production",
      );
    }
  } else {
    devKeys = await ensureDevKeys(db, configured.length);
    if (devKeys)
      logger.warn("generated the development keys dev-admin and dev-worker; their tokens are printed once");
  }
  const authenticator = new ApiKeyAuthenticator(db, configured, {
    refreshMs: config.apiKeys.refreshMs,
    logger,
  });
  await authenticator.refresh();

  const sealed = await sealLegacySecrets(db, secrets);
  if (sealed > 0) logger.info({ runs: sealed }, "encrypted plaintext source secrets of earlier runs");

  const server = {
    certFile: config.tls.certFile,
    keyFile: config.tls.keyFile,
    clientCaFile: config.tls.clientCaFile,
  };
  const tls = isServerTls(server);
  const mutual = tls && Boolean(server.clientCaFile);
  logger.info({ tls, mutual_tls: mutual, api_keys_configured: configured.length }, "security settled");
  return {
    authenticator,
    secrets,
    ...(devKeys ? { devKeys } : {}),
    serverCredentials: serverCredentials(server),
    clientCredentials: channelCredentials(
      {
        caFile: config.tls.caFile ?? config.tls.clientCaFile,
        // Under mutual TLS this coordinator shows its own certificate to the leader.
        certFile: mutual ? server.certFile : undefined,
        keyFile: mutual ? server.keyFile : undefined,
      },
      { tls },
    ),
  };
}
