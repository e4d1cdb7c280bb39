import { hostname } from "node:os";
import { clientTlsProblems, MAX_TOKEN_LENGTH, secretKeyProblems } from "@drover/auth";
import {
  address,
  ConfigError,
  effectiveTouchMs,
  intVar,
  metricsHost,
  metricsPort,
  NATS_SETTINGS,
  parseEnv,
  postgresUrl,
  SHARED_SETTINGS,
  type SharedSettings,
  settingsDisagreements,
  sharedSettingsOf,
  staleTaskMs,
  taskLockProblems,
  taskTouchMs,
  z,
} from "@drover/config";
import { DESTINATION_PROBE_MS, REVERT_WINDOW_SIZE, WINDOW_DEADLINE_MS } from "@drover/engine";
import type { Client, WorkerService } from "@drover/proto";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover"),
  /** NATS_URL: a server, or a cluster's servers comma-separated; DROVER_STREAM_REPLICAS: the stream's copies. */
  ...NATS_SETTINGS,
  DROVER_COORDINATOR_ADDRESS: address("127.0.0.1:50051"),
  /**
   * How long a starting worker waits for its coordinator to come up and say its settings (0: it
   * asks once, and a coordinator not listening yet leaves them unchecked). For a worker started
   * together with its coordinator (Kubernetes starts pods in no order), so the check is made.
   */
  DROVER_COORDINATOR_WAIT_MS: intVar(0, 600_000, 0),
  /**
   * Lane width (tasks this process runs at once, each holding at most one database connection at a
   * time), queue prefix, attempts, notes cap and the reaper's stale-lock threshold (the touch
   * interval must stay well under it): checked against the coordinator's at start.
   */
  ...SHARED_SETTINGS,
  DROVER_WORKER_ID: z
    .string()
    .default(`${hostname()}-${process.pid}`)
    .refine((v) => v.length <= 100, { message: "must be at most 100 characters" }),
  /** How long one window's transaction may take before the task retries it (why 60 s: window-transaction.ts). */
  DROVER_WINDOW_DEADLINE_MS: intVar(1_000, 3_600_000, WINDOW_DEADLINE_MS),
  /** How long a run waits after the destination's schema refused its rows before trying a window again. */
  DROVER_DESTINATION_PROBE_MS: intVar(100, 3_600_000, DESTINATION_PROBE_MS),
  /** Records a revert run removes per window, each window one transaction with its checkpoint. */
  DROVER_REVERT_WINDOW_SIZE: intVar(1, 10_000, REVERT_WINDOW_SIZE),
  /** A query returning one numeric `value`: the destination database's pressure. */
  DROVER_PRESSURE_QUERY: z.string().optional(),
  /** Above this value workers defer instead of claiming (default: 90 % of connections active). */
  DROVER_PRESSURE_THRESHOLD: z.coerce.number({ message: "must be a number" }).default(0.9),
  /** How long a deferred message waits before it is offered again. */
  DROVER_PRESSURE_DEFER_MS: intVar(100, 600_000, 5_000),
  /** How long a SIGTERM waits for running tasks to commit their window and hand back. */
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 20_000),
  /** How often a running task refreshes its lock; unset, derived from DROVER_STALE_TASK_MS. */
  DROVER_TASK_TOUCH_MS: taskTouchMs(),
  /**
   * How long this worker's liveness record lives without a heartbeat (sent every fifth of it): a
   * worker silent for this long is dead to the reaper, which hands its tasks on at once. A frozen
   * or partitioned worker that comes back later is fenced. Well under DROVER_STALE_TASK_MS.
   */
  DROVER_WORKER_LIVENESS_MS: intVar(2_000, 600_000, 10_000),
  /** How long the worker tries to get its queue consumer back before it fails (exits non-zero). */
  DROVER_CONSUMER_RECOVERY_MS: intVar(1_000, 3_600_000, 120_000),
  /** Prometheus metrics at http://DROVER_METRICS_HOST:DROVER_METRICS_PORT/metrics (`off` for none). */
  DROVER_METRICS_PORT: metricsPort(9465),
  DROVER_METRICS_HOST: metricsHost(),
  // Credentials (docs/security.md, "Keys and secrets"); checked by checkAuthConfig, which never quotes them.
  /** The worker-scoped bearer token sent on every WorkerService call. Required. */
  DROVER_WORKER_TOKEN: z.string().optional(),
  /** `keyId:base64key[,...]`, the coordinators' keyring: opens the runs' source secrets. */
  DROVER_SECRET_KEYS: z.string().optional(),
  DROVER_SECRET_KEYS_FILE: z.string().optional(),
  /** TLS to the coordinator: its CA; with a client certificate and key, mutual TLS. */
  DROVER_TLS_CA_FILE: z.string().optional(),
  DROVER_TLS_CLIENT_CERT_FILE: z.string().optional(),
  DROVER_TLS_CLIENT_KEY_FILE: z.string().optional(),
  NODE_ENV: z.string().optional(),
});

export type WorkerConfig = z.infer<typeof schema> & {
  DROVER_WORKER_TOKEN: string;
  DROVER_TASK_TOUCH_MS: number;
};

export function loadWorkerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  // checkAuthConfig has refused a missing or malformed token, checkTaskLock a touch too slow for the reaper.
  const config = parseEnv(schema, env, (e) => [...checkAuthConfig(e), ...checkTaskLock(e)]);
  return {
    ...config,
    DROVER_WORKER_TOKEN: (config.DROVER_WORKER_TOKEN ?? "").trim(),
    DROVER_TASK_TOUCH_MS: effectiveTouchMs(config.DROVER_STALE_TASK_MS, config.DROVER_TASK_TOUCH_MS),
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
  let theirs: SharedSettings | undefined;
  let lastError: unknown;
  const waitMs = config.DROVER_COORDINATOR_WAIT_MS;
  // Twice: a first call that finds its coordinator gone moves the link to the announced leader.
  // The first waits up to DROVER_COORDINATOR_WAIT_MS for a coordinator that is still starting.
  for (let attempt = 0; attempt < 2 && !theirs; attempt++) {
    const waits = attempt === 0 && waitMs > 0;
    try {
      const res = await coordinator.getSettings(
        { workerId: config.DROVER_WORKER_ID },
        {
          deadline: new Date(Date.now() + 5_000 + (waits ? waitMs : 0)),
          ...(waits ? { waitForReady: true } : {}),
        },
      );
      theirs = {
        DROVER_LANE_WIDTH: res.laneWidth,
        DROVER_QUEUE_PREFIX: res.queuePrefix,
        DROVER_MAX_ATTEMPTS: res.maxAttempts,
        DROVER_NOTES_CAP: res.notesCap,
        DROVER_STALE_TASK_MS: res.staleTaskMs,
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
  const problems = settingsDisagreements(sharedSettingsOf(config), theirs);
  if (problems.length > 0) throw new ConfigError(problems);
}
