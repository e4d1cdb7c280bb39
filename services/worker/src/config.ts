import { hostname } from "node:os";
import { address, identifier, intVar, parseEnv, postgresUrl, z } from "@drover/config";

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
  /** A query returning one numeric `value`: the destination database's pressure. */
  DROVER_PRESSURE_QUERY: z.string().optional(),
  /** Above this value workers defer instead of claiming (default: 90 % of connections active). */
  DROVER_PRESSURE_THRESHOLD: z.coerce.number({ message: "must be a number" }).default(0.9),
  /** How long a deferred message waits before it is offered again. */
  DROVER_PRESSURE_DEFER_MS: intVar(100, 600_000, 5_000),
  /** How long a SIGTERM waits for running tasks to commit their window and hand back. */
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 20_000),
});

export type WorkerConfig = z.infer<typeof schema>;

export function loadWorkerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  return parseEnv(schema, env);
}
