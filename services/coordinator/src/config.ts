import { ApiKeyError, loadApiKeys, secretKeyProblems, serverTlsProblems } from "@drover/auth";
import {
  address,
  ConfigError,
  intVar,
  type KeyringOptions,
  keyringOptions,
  type MetricsOptions,
  metricsHost,
  metricsOptions,
  metricsPort,
  NATS_SETTINGS,
  parseEnv,
  postgresUrl,
  SHARED_SETTINGS,
  type SharedOptions,
  sharedOptions,
  z,
} from "@drover/config";
import type { FairShareMode } from "./dispatcher.js";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover").describe(
    "The Postgres database: created if missing, and migrated at start under an advisory lock.",
  ),
  /** NATS_URL: a server, or a cluster's servers comma-separated; DROVER_STREAM_REPLICAS: the stream's copies. */
  ...NATS_SETTINGS,
  DROVER_GRPC_ADDRESS: address("127.0.0.1:50051").describe(
    "Where the gRPC server (RunService, WorkerService, health) listens; `host:0` picks a free port (named in the ready line).",
  ),
  /**
   * Lane width, queue prefix, attempts, notes cap and the stale-lock threshold (a running task whose
   * lock has not moved for this long belongs to a dead worker): the workers must have the same.
   */
  ...SHARED_SETTINGS,
  DROVER_REAPER_INTERVAL_MS: intVar(100, 600_000, 2_000).describe(
    "How often the leader's reaper runs (stale locks, dead workers, lost messages, missed barriers); the leader lease is refreshed at each pass. The former name `DROVER_SWEEP_INTERVAL_MS` is read when this is unset.",
  ),
  DROVER_LEADER_TIMEOUT_MS: intVar(3_000, 600_000, 15_000).describe(
    "A leader silent this long (cut off from Postgres, frozen) loses the lease to another coordinator; it steps down on its own before then. Also how long Postgres waits on a coordinator's silent connection before ending its session. At least 3× `DROVER_REAPER_INTERVAL_MS`, at which the lease is refreshed.",
  ),
  DROVER_SWEEP_INTERVAL_MS: intVar(100, 600_000, 2_000)
    .optional()
    .describe("Deprecated: the former name of `DROVER_REAPER_INTERVAL_MS`, read when that is unset."),
  DROVER_TENANT_MAX_INFLIGHT: intVar(0, 100_000, 0).describe(
    "At most this many tasks of one tenant in flight (running, or published and not yet claimed), over all its live runs, so a tenant with many runs or a huge one cannot take the whole pool; `0`: no cap. Within it every live run gets an equal share of the live workers' lane slots.",
  ),
  DROVER_FAIR_SHARE: z
    .enum(["adaptive", "lend", "reserve"], { message: "must be adaptive, lend or reserve" })
    .default("adaptive")
    .describe(
      "What becomes of a live run's unused share of the pool: `adaptive` lends it to the other runs while the workers wait on the source and keeps it while any live worker's event loop is busy; `lend` always lends; `reserve` never does.",
    ),
  DROVER_DISPATCH_SLICES: intVar(1, 256, 1).describe(
    "Dispatch rounds are split into this many slices by a hash of the tenant id: each round reads and deals out only its slice's live runs, under its own lock, so rounds of different slices run at once on one coordinator or several. `1` (one round for all runs) suits up to a few hundred live runs; with thousands, or with more than one coordinator dispatching, use a few slices per coordinator. Every coordinator must carry the same value.",
  ),
  DROVER_REDISPATCH_AFTER_MS: intVar(5_000, 3_600_000, 120_000).describe(
    "A published task still pending after this long was lost by the broker: it is published again.",
  ),
  DROVER_RETENTION_DAYS: intVar(1, 3650, 90).describe(
    "Finished runs keep their tasks and notes this long; then the reaper freezes their counts on the run and deletes them. Pruned notes no longer explain failed rows: keep it long. Audit events (drover.audit_events) are kept this long after they happened.",
  ),
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 10_000).describe(
    "On SIGTERM, how long in-flight RPCs get before the coordinator stops.",
  ),
  DROVER_VERIFY_SAMPLE_SIZE: intVar(0, 100_000, 200).describe(
    "Rows per kind that verification fetches from the source again and compares field by field with their destination record (each costs a get call; a provider fetching one request a row may take fewer: the crm a fifth); `0` checks counts and ids only.",
  ),
  DROVER_METRICS_PORT: metricsPort(9464),
  DROVER_METRICS_HOST: metricsHost(),
  // Authentication and secrets (docs/security.md, "Keys and secrets"). Kept as raw text here and checked by
  // checkAuthConfig, whose messages never echo a key: parseEnv quotes the value it rejects.
  DROVER_API_KEYS: z
    .string()
    .optional()
    .describe(
      "API keys, `keyId:sha256hex:scope[+scope]` comma-separated; combined with the keys issued into `drover.api_keys`.",
    ),
  DROVER_API_KEYS_FILE: z
    .string()
    .optional()
    .describe("A file of the same entries (one per line, `#` comments), instead of `DROVER_API_KEYS`."),
  DROVER_API_KEYS_REFRESH_MS: intVar(100, 600_000, 5_000).describe(
    "How soon keys issued or revoked in `drover.api_keys` take effect.",
  ),
  DROVER_SECRET_KEYS: z
    .string()
    .optional()
    .meta({ shownDefault: "the development keyring in `.artifacts/dev-secret-keys`" })
    .describe(
      "The keyring sealing source secrets, `keyId:base64key[,...]` (32 random bytes each): the first encrypts, every one decrypts. Required when `NODE_ENV=production`.",
    ),
  DROVER_SECRET_KEYS_FILE: z
    .string()
    .optional()
    .describe("A file holding the keyring, instead of `DROVER_SECRET_KEYS`."),
  DROVER_TLS_CERT_FILE: z
    .string()
    .optional()
    .meta({ shownDefault: "none (plaintext)" })
    .describe("PEM certificate: with `DROVER_TLS_KEY_FILE`, the gRPC server serves TLS."),
  DROVER_TLS_KEY_FILE: z.string().optional().describe("PEM private key of `DROVER_TLS_CERT_FILE`."),
  DROVER_TLS_CLIENT_CA_FILE: z
    .string()
    .optional()
    .describe("Require client certificates signed by this CA (mutual TLS)."),
  DROVER_TLS_CA_FILE: z
    .string()
    .optional()
    .describe("The CA other coordinators' certificates chain to, for forwarding budget calls to the leader."),
  DROVER_CLOSE_GRACE_HOURS: intVar(0, 8_760, 72).describe(
    "After CloseMigration, how long an account's ledger stays (a reopen withdraws the close meanwhile) before the leader removes it in small batches; a run of the account after that imports as if new.",
  ),
  DROVER_WEBHOOK_PUBLIC_URL: z
    .string()
    .optional()
    .refine((v) => v === undefined || /^https?:\/\/[^\s/]+/.test(v), { message: "must be an http(s) URL" })
    .meta({ shownDefault: "none (follow runs poll)" })
    .describe(
      "Where the source can reach the webhook receiver (`services/receiver`) from the internet, e.g. `https://hooks.example.com` (docs/follow.md). Unset: follow runs poll, and say so.",
    ),
  DROVER_FOLLOW_RECONCILE_SECONDS: intVar(1, 86_400, 3_600).describe(
    "With webhooks, a follow run's pass is a reconcile: every this many seconds, and always one at cutover.",
  ),
  NODE_ENV: z
    .string()
    .optional()
    .describe("`production` refuses the generated development keys and keyring."),
});

/** The coordinator's settings, as the configuration reference (docs/configuration.md) renders them. */
export const coordinatorSettings = schema;

/**
 * The coordinator's settings, compiled once from its environment (loadCoordinatorConfig): the
 * coordinator's code reads these names, never the variables' (each variable is described in the
 * schema above).
 */
export interface CoordinatorConfig extends SharedOptions {
  databaseUrl: string;
  natsServers: string[];
  streamReplicas: number;
  grpcAddress: string;
  reaperIntervalMs: number;
  leaderTimeoutMs: number;
  /** Tasks in flight per tenant over all its runs; 0 for no cap. */
  tenantMaxInflight: number;
  fairShare: FairShareMode;
  /** Dispatch rounds' slices by tenant (task-dispatch.ts); every coordinator the same. */
  dispatchSlices: number;
  redispatchAfterMs: number;
  retentionDays: number;
  shutdownGraceMs: number;
  verifySampleSize: number;
  /** How long a closed migration's ledger stays (CloseMigration). */
  closeGraceMs: number;
  /** Where the source reaches the webhook receiver; undefined: follow runs poll (run-webhooks.ts). */
  webhookPublicUrl: string | undefined;
  /** With webhooks, a follow run's pass (a reconcile) this often. */
  followReconcileSeconds: number;
  metrics: MetricsOptions;
  apiKeys: { keys?: string; file?: string; refreshMs: number };
  keyring: KeyringOptions;
  tls: { certFile?: string; keyFile?: string; clientCaFile?: string; caFile?: string };
}

export function loadCoordinatorConfig(env: NodeJS.ProcessEnv = process.env): CoordinatorConfig {
  const { DROVER_SWEEP_INTERVAL_MS: deprecated, ...config } = parseEnv(schema, env, checkAuthConfig);
  if (!env.DROVER_REAPER_INTERVAL_MS && env.DROVER_SWEEP_INTERVAL_MS && deprecated !== undefined)
    config.DROVER_REAPER_INTERVAL_MS = deprecated;
  // The lease is refreshed once per reaper interval: fewer than three refreshes per timeout and one
  // slow pass loses a live leader its lease.
  if (config.DROVER_LEADER_TIMEOUT_MS < 3 * config.DROVER_REAPER_INTERVAL_MS)
    throw new ConfigError([
      `DROVER_LEADER_TIMEOUT_MS (${config.DROVER_LEADER_TIMEOUT_MS}) must be at least 3× DROVER_REAPER_INTERVAL_MS (${config.DROVER_REAPER_INTERVAL_MS}), the lease being refreshed once per reaper pass: raise DROVER_LEADER_TIMEOUT_MS to at least ${3 * config.DROVER_REAPER_INTERVAL_MS} or lower DROVER_REAPER_INTERVAL_MS`,
    ]);
  return {
    ...sharedOptions(config),
    databaseUrl: config.DATABASE_URL,
    natsServers: config.NATS_URL,
    streamReplicas: config.DROVER_STREAM_REPLICAS,
    grpcAddress: config.DROVER_GRPC_ADDRESS,
    reaperIntervalMs: config.DROVER_REAPER_INTERVAL_MS,
    leaderTimeoutMs: config.DROVER_LEADER_TIMEOUT_MS,
    tenantMaxInflight: config.DROVER_TENANT_MAX_INFLIGHT,
    fairShare: config.DROVER_FAIR_SHARE,
    dispatchSlices: config.DROVER_DISPATCH_SLICES,
    redispatchAfterMs: config.DROVER_REDISPATCH_AFTER_MS,
    retentionDays: config.DROVER_RETENTION_DAYS,
    shutdownGraceMs: config.DROVER_SHUTDOWN_GRACE_MS,
    verifySampleSize: config.DROVER_VERIFY_SAMPLE_SIZE,
    closeGraceMs: config.DROVER_CLOSE_GRACE_HOURS * 3_600_000,
    webhookPublicUrl: config.DROVER_WEBHOOK_PUBLIC_URL,
    followReconcileSeconds: config.DROVER_FOLLOW_RECONCILE_SECONDS,
    metrics: metricsOptions(config),
    apiKeys: {
      keys: config.DROVER_API_KEYS,
      file: config.DROVER_API_KEYS_FILE,
      refreshMs: config.DROVER_API_KEYS_REFRESH_MS,
    },
    keyring: keyringOptions(config),
    tls: {
      certFile: config.DROVER_TLS_CERT_FILE,
      keyFile: config.DROVER_TLS_KEY_FILE,
      clientCaFile: config.DROVER_TLS_CLIENT_CA_FILE,
      caFile: config.DROVER_TLS_CA_FILE,
    },
  };
}

/** What is wrong with the key, secret and TLS variables, without quoting any of them. */
function checkAuthConfig(env: NodeJS.ProcessEnv): string[] {
  const problems: string[] = [];
  try {
    loadApiKeys({ keys: env.DROVER_API_KEYS, file: env.DROVER_API_KEYS_FILE });
  } catch (err) {
    if (!(err instanceof ApiKeyError)) throw err;
    problems.push(err.message);
  }
  problems.push(...secretKeyProblems(env));
  problems.push(
    ...serverTlsProblems({
      certFile: env.DROVER_TLS_CERT_FILE,
      keyFile: env.DROVER_TLS_KEY_FILE,
      clientCaFile: env.DROVER_TLS_CLIENT_CA_FILE,
    }),
  );
  return problems;
}
