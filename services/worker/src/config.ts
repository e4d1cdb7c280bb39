import { hostname } from "node:os";
import { clientTlsProblems, MAX_TOKEN_LENGTH, secretKeyProblems } from "@drover/auth";
import {
  address,
  ConfigError,
  effectiveTouchMs,
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
  settingsDisagreements,
  sharedOptions,
  staleTaskMs,
  taskLockProblems,
  taskTouchMs,
  z,
} from "@drover/config";
import { DESTINATION_PROBE_MS, REVERT_WINDOW_SIZE, WINDOW_DEADLINE_MS } from "@drover/engine";
import type { Client, WorkerService } from "@drover/proto";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover").describe(
    "The Postgres database, the coordinators' (which create and migrate it).",
  ),
  /** NATS_URL: a server, or a cluster's servers comma-separated; DROVER_STREAM_REPLICAS: the stream's copies. */
  ...NATS_SETTINGS,
  DROVER_COORDINATOR_ADDRESS: address("127.0.0.1:50051").describe(
    "A coordinator (any replica): where budget leases, settings and TaskFinished (best effort) go.",
  ),
  DROVER_COORDINATOR_WAIT_MS: intVar(0, 600_000, 0).describe(
    "At start, how long to wait for a coordinator still starting to say its settings (`0`: ask once, and a coordinator not listening yet leaves them unchecked). For a worker started together with its coordinator (Kubernetes starts pods in no order), so the check is made.",
  ),
  /**
   * Lane width (tasks this process runs at once, each holding at most one database connection at a
   * time), queue prefix, attempts, notes cap and the reaper's stale-lock threshold (the touch
   * interval must stay well under it): checked against the coordinator's at start.
   */
  ...SHARED_SETTINGS,
  DROVER_WORKER_ID: z
    .string()
    .default(`${hostname()}-${process.pid}`)
    .refine((v) => v.length <= 100, { message: "must be at most 100 characters" })
    .meta({ format: "text, at most 100 characters", shownDefault: "`<hostname>-<pid>`" })
    .describe("This worker's name in task locks, its liveness record and logs."),
  // Why 60 s: window-transaction.ts.
  DROVER_WINDOW_DEADLINE_MS: intVar(1_000, 3_600_000, WINDOW_DEADLINE_MS).describe(
    "A window's transaction not settled by then is ended, and the task retries it.",
  ),
  DROVER_DESTINATION_PROBE_MS: intVar(100, 3_600_000, DESTINATION_PROBE_MS).describe(
    "After the product's schema refused a window (a column added, dropped or renamed under the run), how long the run waits before trying a window again.",
  ),
  DROVER_REVERT_WINDOW_SIZE: intVar(1, 10_000, REVERT_WINDOW_SIZE).describe(
    "Records a revert run removes per window, each window one transaction with its checkpoint.",
  ),
  DROVER_PRESSURE_QUERY: z
    .string()
    .optional()
    .meta({ shownDefault: "the share of the server's connection slots in active use" })
    .describe("A query returning one numeric `value`: the destination database's pressure."),
  DROVER_PRESSURE_THRESHOLD: z.coerce
    .number({ message: "must be a number" })
    .default(0.9)
    .describe("Above this pressure workers defer task messages instead of claiming them."),
  DROVER_PRESSURE_DEFER_MS: intVar(100, 600_000, 5_000).describe(
    "How long a deferred message waits before it is offered again.",
  ),
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 20_000).describe(
    "On SIGTERM, how long running tasks get to commit their window and hand back; a task still running then is handed back, fenced by its claim.",
  ),
  DROVER_TASK_TOUCH_MS: taskTouchMs()
    .meta({ shownDefault: "a sixth of `DROVER_STALE_TASK_MS`, at most `15000`" })
    .describe(
      "How often a running task refreshes its lock; refused unless `DROVER_STALE_TASK_MS` is at least 3× it.",
    ),
  DROVER_WORKER_LIVENESS_MS: intVar(2_000, 600_000, 10_000).describe(
    "How long this worker's liveness record lives without a heartbeat (sent every fifth of it): a worker silent this long is dead to the reaper, which hands its tasks on at once; one that comes back later is fenced. Well under `DROVER_STALE_TASK_MS`.",
  ),
  DROVER_CONSUMER_RECOVERY_MS: intVar(1_000, 3_600_000, 120_000).describe(
    "How long the worker tries to get its queue consumer back before it fails (hands back what it holds, exits 1).",
  ),
  DROVER_METRICS_PORT: metricsPort(9465),
  DROVER_METRICS_HOST: metricsHost(),
  // Credentials (docs/security.md, "Keys and secrets"); checked by checkAuthConfig, which never quotes them.
  DROVER_WORKER_TOKEN: z
    .string()
    .optional()
    .meta({ shownDefault: "required" })
    .describe("The worker-scoped bearer token sent on every `WorkerService` call."),
  DROVER_SECRET_KEYS: z
    .string()
    .optional()
    .meta({ shownDefault: "the development keyring in `.artifacts/dev-secret-keys`" })
    .describe(
      "The coordinators' keyring, `keyId:base64key[,...]`: opens the runs' source secrets. Required when `NODE_ENV=production`.",
    ),
  DROVER_SECRET_KEYS_FILE: z
    .string()
    .optional()
    .describe("A file holding the keyring, instead of `DROVER_SECRET_KEYS`."),
  DROVER_TLS_CA_FILE: z
    .string()
    .optional()
    .meta({ shownDefault: "none (plaintext)" })
    .describe("TLS to the coordinator: the CA its certificate chains to."),
  DROVER_TLS_CLIENT_CERT_FILE: z
    .string()
    .optional()
    .describe("The worker's certificate under mutual TLS, with `DROVER_TLS_CLIENT_KEY_FILE`."),
  DROVER_TLS_CLIENT_KEY_FILE: z
    .string()
    .optional()
    .describe("PEM private key of `DROVER_TLS_CLIENT_CERT_FILE`."),
  NODE_ENV: z.string().optional().describe("`production` refuses the development keyring."),
});

/** The worker's settings, as the configuration reference (docs/configuration.md) renders them. */
export const workerSettings = schema;

/**
 * The worker's settings, compiled once from its environment (loadWorkerConfig): the worker's code
 * reads these names, never the variables' (each variable is described in the schema above).
 */
export interface WorkerConfig extends SharedOptions {
  databaseUrl: string;
  natsServers: string[];
  streamReplicas: number;
  coordinatorAddress: string;
  coordinatorWaitMs: number;
  workerId: string;
  windowDeadlineMs: number;
  destinationProbeMs: number;
  revertWindowSize: number;
  /** The destination database's pressure: above `threshold`, messages wait `deferMs`. */
  pressure: { query?: string; threshold: number; deferMs: number };
  shutdownGraceMs: number;
  /** How often a running task touches its lock: DROVER_TASK_TOUCH_MS, or derived from the stale threshold. */
  taskTouchMs: number;
  livenessMs: number;
  consumerRecoveryMs: number;
  metrics: MetricsOptions;
  /** The worker-scoped bearer token, trimmed. */
  token: string;
  keyring: KeyringOptions;
  tls: { caFile?: string; certFile?: string; keyFile?: string };
}

export function loadWorkerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  // checkAuthConfig has refused a missing or malformed token, checkTaskLock a touch too slow for the reaper.
  const config = parseEnv(schema, env, (e) => [...checkAuthConfig(e), ...checkTaskLock(e)]);
  return {
    ...sharedOptions(config),
    databaseUrl: config.DATABASE_URL,
    natsServers: config.NATS_URL,
    streamReplicas: config.DROVER_STREAM_REPLICAS,
    coordinatorAddress: config.DROVER_COORDINATOR_ADDRESS,
    coordinatorWaitMs: config.DROVER_COORDINATOR_WAIT_MS,
    workerId: config.DROVER_WORKER_ID,
    windowDeadlineMs: config.DROVER_WINDOW_DEADLINE_MS,
    destinationProbeMs: config.DROVER_DESTINATION_PROBE_MS,
    revertWindowSize: config.DROVER_REVERT_WINDOW_SIZE,
    pressure: {
      query: config.DROVER_PRESSURE_QUERY,
      threshold: config.DROVER_PRESSURE_THRESHOLD,
      deferMs: config.DROVER_PRESSURE_DEFER_MS,
    },
    shutdownGraceMs: config.DROVER_SHUTDOWN_GRACE_MS,
    taskTouchMs: effectiveTouchMs(config.DROVER_STALE_TASK_MS, config.DROVER_TASK_TOUCH_MS),
    livenessMs: config.DROVER_WORKER_LIVENESS_MS,
    consumerRecoveryMs: config.DROVER_CONSUMER_RECOVERY_MS,
    metrics: metricsOptions(config),
    token: (config.DROVER_WORKER_TOKEN ?? "").trim(),
    keyring: keyringOptions(config),
    tls: {
      caFile: config.DROVER_TLS_CA_FILE,
      certFile: config.DROVER_TLS_CLIENT_CERT_FILE,
      keyFile: config.DROVER_TLS_CLIENT_KEY_FILE,
    },
  };
}

/** The touch interval against the reaper's threshold, once both parse (the schema reports them otherwise). */
function checkTaskLock(env: NodeJS.ProcessEnv): string[] {
  const stale = staleTaskMs().safeParse(env.DROVER_STALE_TASK_MS || undefined);
  const touch = taskTouchMs().safeParse(env.DROVER_TASK_TOUCH_MS || undefined);
  if (!stale.success || !touch.success) return [];
  return taskLockProblems(stale.data, touch.data);
}

function checkAuthConfig(env: NodeJS.ProcessEnv): string[] {
  const problems: string[] = [];
  const token = env.DROVER_WORKER_TOKEN?.trim() ?? "";
  if (!token) {
    problems.push(
      "DROVER_WORKER_TOKEN: required: a worker-scoped token, as printed by the coordinator's first start (dev-keys) or issued with `pnpm --filter @drover/coordinator keys issue --scope worker`",
    );
  } else if (token.length > MAX_TOKEN_LENGTH || /\s/.test(token)) {
    problems.push(
      `DROVER_WORKER_TOKEN: must be one token of at most ${MAX_TOKEN_LENGTH} characters, without spaces`,
    );
  }
  problems.push(...secretKeyProblems(env));
  problems.push(
    ...clientTlsProblems({
      caFile: env.DROVER_TLS_CA_FILE,
      certFile: env.DROVER_TLS_CLIENT_CERT_FILE,
      keyFile: env.DROVER_TLS_CLIENT_KEY_FILE,
    }),
  );
  return problems;
}

/**
 * Refuses to start a worker whose shared settings differ from the coordinator's: a different queue
 * prefix pulls from a stream nobody feeds, different attempts or notes cap judge the same task two
 * ways. Adopting the coordinator's values instead would hide that two configurations drifted, so
 * the worker stops with a ConfigError (exit code 2) naming each variable, like any other bad value.
 * A coordinator that cannot answer now (down, or older than GetSettings) leaves the check to the
 * next start with a warning: a worker does not need a coordinator to run. One that is still
 * starting is waited for, up to DROVER_COORDINATOR_WAIT_MS.
 */
export async function checkSharedSettings(
  coordinator: Pick<Client<typeof WorkerService>, "getSettings">,
  config: WorkerConfig,
  warn: (fields: object, message: string) => void,
): Promise<void> {
  let theirs: SharedOptions | undefined;
  let lastError: unknown;
  const waitMs = config.coordinatorWaitMs;
  // Twice: a first call that finds its coordinator gone moves the link to the announced leader.
  // The first waits up to DROVER_COORDINATOR_WAIT_MS for a coordinator that is still starting.
  for (let attempt = 0; attempt < 2 && !theirs; attempt++) {
    const waits = attempt === 0 && waitMs > 0;
    try {
      const res = await coordinator.getSettings(
        { workerId: config.workerId },
        {
          deadline: new Date(Date.now() + 5_000 + (waits ? waitMs : 0)),
          ...(waits ? { waitForReady: true } : {}),
        },
      );
      theirs = {
        laneWidth: res.laneWidth,
        queuePrefix: res.queuePrefix,
        maxAttempts: res.maxAttempts,
        notesCap: res.notesCap,
        staleTaskMs: res.staleTaskMs,
      };
    } catch (err) {
      lastError = err;
    }
  }
  if (!theirs) {
    warn(
      { err: String(lastError) },
      "the coordinator did not say its settings; lane width, queue prefix, attempts and notes cap are unchecked",
    );
    return;
  }
  const problems = settingsDisagreements(config, theirs);
  if (problems.length > 0) throw new ConfigError(problems);
}
