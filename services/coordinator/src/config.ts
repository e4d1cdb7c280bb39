import { ApiKeyError, loadApiKeys, secretKeyProblems, serverTlsProblems } from "@drover/auth";
import {
  address,
  ConfigError,
  intVar,
  metricsHost,
  metricsPort,
  NATS_SETTINGS,
  parseEnv,
  postgresUrl,
  SHARED_SETTINGS,
  z,
} from "@drover/config";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover"),
  /** NATS_URL: a server, or a cluster's servers comma-separated; DROVER_STREAM_REPLICAS: the stream's copies. */
  ...NATS_SETTINGS,
  DROVER_GRPC_ADDRESS: address("127.0.0.1:50051"),
  /**
   * Lane width, queue prefix, attempts, notes cap and the stale-lock threshold (a running task whose
   * lock has not moved for this long belongs to a dead worker): the workers must have the same.
   */
  ...SHARED_SETTINGS,
  /** How often the leader's reaper runs. */
  DROVER_REAPER_INTERVAL_MS: intVar(100, 600_000, 2_000),
  /**
   * A leader silent this long (cut off from Postgres, frozen) loses the lease to another
   * coordinator; it steps down on its own before then. At least 3× the reaper interval, at which
   * the lease is refreshed.
   */
  DROVER_LEADER_TIMEOUT_MS: intVar(3_000, 600_000, 15_000),
  /** The reaper interval's former name, read when DROVER_REAPER_INTERVAL_MS is unset. Deprecated. */
  DROVER_SWEEP_INTERVAL_MS: intVar(100, 600_000, 2_000).optional(),
  /**
   * At most this many tasks of one tenant in flight (running, or published and not yet claimed), over
   * all its live runs: a tenant with many runs or a huge one cannot take the whole pool. 0: no cap.
   * Within it every live run gets an equal share of the live workers' lane slots (dispatcher.ts).
   */
  DROVER_TENANT_MAX_INFLIGHT: intVar(0, 100_000, 0),
  /**
   * What becomes of a live run's unused share of the pool (fair-share.ts): `adaptive` lends it to
   * the other runs while the workers wait on the source and keeps it free while any live worker's
   * event loop is busy; `lend` always lends; `reserve` never does.
   */
  DROVER_FAIR_SHARE: z
    .enum(["adaptive", "lend", "reserve"], { message: "must be adaptive, lend or reserve" })
    .default("adaptive"),
  /** A published task still pending after this long was lost by the broker; publish it again. */
  DROVER_REDISPATCH_AFTER_MS: intVar(5_000, 3_600_000, 120_000),
  /**
   * Finished runs keep their tasks and notes this long; then the reaper freezes their counts on
   * the run and deletes them. Pruned notes no longer explain failed rows: keep it long.
   */
  DROVER_RETENTION_DAYS: intVar(1, 3650, 90),
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 10_000),
  /**
   * Rows per kind that verification fetches from the source again and compares field by field with
   * their destination record (each costs a get call); 0 checks counts and ids only.
   */
  DROVER_VERIFY_SAMPLE_SIZE: intVar(0, 100_000, 200),
  /** Prometheus metrics at http://DROVER_METRICS_HOST:DROVER_METRICS_PORT/metrics (`off` for none). */
  DROVER_METRICS_PORT: metricsPort(9464),
  DROVER_METRICS_HOST: metricsHost(),
  /**
   * Where the source can reach the webhook receiver (services/receiver) from the internet, e.g.
   * https://hooks.example.com (docs/follow.md). Unset: follow runs poll, and say so.
   */
  DROVER_WEBHOOK_PUBLIC_URL: z
    .string()
    .optional()
    .refine((v) => v === undefined || /^https?:\/\/[^\s/]+/.test(v), { message: "must be an http(s) URL" }),
  /** With webhooks, a follow run's pass is a reconcile: every this many seconds (and always one at cutover). */
  DROVER_FOLLOW_RECONCILE_SECONDS: intVar(1, 86_400, 3_600),
  // Authentication and secrets (README, "Keys and secrets"). Kept as raw text here and checked by
  // checkAuthConfig, whose messages never echo a key: parseEnv quotes the value it rejects.
  /** `keyId:sha256hex:scope[+scope]`, comma-separated; combined with the keys in drover.api_keys. */
  DROVER_API_KEYS: z.string().optional(),
  /** A file of the same entries (one per line, `#` comments), instead of DROVER_API_KEYS. */
  DROVER_API_KEYS_FILE: z.string().optional(),
  /** How soon keys issued or revoked in drover.api_keys take effect. */
  DROVER_API_KEYS_REFRESH_MS: intVar(100, 600_000, 5_000),
  /** `keyId:base64key[,...]`: the first encrypts source secrets, every one decrypts. */
  DROVER_SECRET_KEYS: z.string().optional(),
  DROVER_SECRET_KEYS_FILE: z.string().optional(),
  /** TLS for the gRPC server; with DROVER_TLS_CLIENT_CA_FILE, mutual TLS. */
  DROVER_TLS_CERT_FILE: z.string().optional(),
  DROVER_TLS_KEY_FILE: z.string().optional(),
  DROVER_TLS_CLIENT_CA_FILE: z.string().optional(),
  /** The CA other coordinators' certificates chain to, for forwarding budget calls to the leader. */
  DROVER_TLS_CA_FILE: z.string().optional(),
  /** `production` refuses the generated development keys and keyring. */
  NODE_ENV: z.string().optional(),
});

export type CoordinatorConfig = Omit<z.infer<typeof schema>, "DROVER_SWEEP_INTERVAL_MS">;

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
  return config;
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
