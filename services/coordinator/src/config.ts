import { address, identifier, intVar, parseEnv, postgresUrl, z } from "@drover/config";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover"),
  NATS_URL: z.string().default("127.0.0.1:4222"),
  DROVER_GRPC_ADDRESS: address("127.0.0.1:50051"),
  /** Must match the workers' lane width: dispatch keeps 2× this many of a run's tasks in flight. */
  DROVER_LANE_WIDTH: intVar(1, 256, 4),
  DROVER_QUEUE_PREFIX: identifier("drover"),
  DROVER_SWEEP_INTERVAL_MS: intVar(100, 600_000, 2_000),
  /** A running task whose lock has not moved for this long belongs to a dead worker. */
  DROVER_STALE_TASK_MS: intVar(5_000, 3_600_000, 90_000),
  /** A published task still pending after this long was lost by the broker; publish it again. */
  DROVER_REDISPATCH_AFTER_MS: intVar(5_000, 3_600_000, 120_000),
  DROVER_MAX_ATTEMPTS: intVar(1, 100, 8),
  DROVER_NOTES_CAP: intVar(100, 10_000_000, 50_000),
  /**
   * Finished runs keep their tasks and notes this long; then the reaper freezes their counts on
   * the run and deletes them. Pruned notes no longer explain failed rows: keep it long.
   */
  DROVER_RETENTION_DAYS: intVar(1, 3650, 90),
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 10_000),
});

export type CoordinatorConfig = z.infer<typeof schema>;

export function loadCoordinatorConfig(env: NodeJS.ProcessEnv = process.env): CoordinatorConfig {
  return parseEnv(schema, env);
}
