import { hostname } from "node:os";
import { clientTlsProblems, MAX_TOKEN_LENGTH, secretKeyProblems } from "@drover/auth";
import {
  address,
  effectiveTouchMs,
  identifier,
  intVar,
  metricsHost,
  metricsPort,
  parseEnv,
  postgresUrl,
  staleTaskMs,
  taskLockProblems,
  taskTouchMs,
  z,
} from "@drover/config";
import { WINDOW_DEADLINE_MS } from "@drover/engine";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover"),
  NATS_URL: z.string().default("127.0.0.1:4222"),
  DROVER_COORDINATOR_ADDRESS: address("127.0.0.1:50051"),
  /** Tasks this process runs at once. Each holds at most one database connection at a time. */
  DROVER_LANE_WIDTH: intVar(1, 256, 4),
  DROVER_QUEUE_PREFIX: identifier("drover"),
  DROVER_WORKER_ID: z
    .string()
    .default(`${hostname()}-${process.pid}`)
    .refine((v) => v.length <= 100, { message: "must be at most 100 characters" }),
  /** Transient failures a task may have before it fails for good. */
  DROVER_MAX_ATTEMPTS: intVar(1, 100, 8),
  DROVER_NOTES_CAP: intVar(100, 10_000_000, 50_000),
  /** How long one window's transaction may take before the task retries it (why 60 s: window-transaction.ts). */
  DROVER_WINDOW_DEADLINE_MS: intVar(1_000, 3_600_000, WINDOW_DEADLINE_MS),
  /** A query returning one numeric `value`: the destination database's pressure. */
  DROVER_PRESSURE_QUERY: z.string().optional(),
  /** Above this value workers defer instead of claiming (default: 90 % of connections active). */
  DROVER_PRESSURE_THRESHOLD: z.coerce.number({ message: "must be a number" }).default(0.9),
  /** How long a deferred message waits before it is offered again. */
  DROVER_PRESSURE_DEFER_MS: intVar(100, 600_000, 5_000),
  /** How long a SIGTERM waits for running tasks to commit their window and hand back. */
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 20_000),
  /** The coordinators' reaper threshold (same variable, same value): the touch interval must stay well under it. */
  DROVER_STALE_TASK_MS: staleTaskMs(),
  /** How often a running task refreshes its lock; unset, derived from DROVER_STALE_TASK_MS. */
  DROVER_TASK_TOUCH_MS: taskTouchMs(),
  /** How long the worker tries to get its queue consumer back before it fails (exits non-zero). */
  DROVER_CONSUMER_RECOVERY_MS: intVar(1_000, 3_600_000, 120_000),
  /** Prometheus metrics at http://DROVER_METRICS_HOST:DROVER_METRICS_PORT/metrics (`off` for none). */
  DROVER_METRICS_PORT: metricsPort(9465),
  DROVER_METRICS_HOST: metricsHost(),
  // Credentials (README, "Keys and secrets"); checked by checkAuthConfig, which never quotes them.
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
