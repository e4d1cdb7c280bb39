import { identifier, intVar, NATS_SETTINGS, parseEnv, postgresUrl, z } from "@drover/config";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover").describe(
    "PostgreSQL, where each follow run's webhook credentials are kept (`drover.run_webhooks`): a delivery is checked against them.",
  ),
  ...NATS_SETTINGS,
  DROVER_QUEUE_PREFIX: identifier("drover").describe(
    "The queue prefix every process of the deployment shares; the event stream is named from it.",
  ),
  DROVER_RECEIVER_HOST: z.string().default("0.0.0.0").describe("Where the webhook receiver listens."),
  DROVER_RECEIVER_PORT: intVar(0, 65_535, 8088).describe("The webhook receiver's HTTP port."),
  DROVER_RECEIVER_MAX_BODY_BYTES: intVar(1_024, 10 * 1024 * 1024, 256 * 1024).describe(
    "Largest delivery accepted (413 above): Pipedrive's events are a few kilobytes.",
  ),
});

/** The receiver's settings, as the configuration reference (docs/configuration.md) renders them. */
export const receiverSettings = schema;

/** The receiver's settings, compiled once from its environment: its code reads these names. */
export interface ReceiverConfig {
  databaseUrl: string;
  natsServers: string[];
  streamReplicas: number;
  queuePrefix: string;
  host: string;
  port: number;
  maxBodyBytes: number;
}

export function loadReceiverConfig(env: NodeJS.ProcessEnv = process.env): ReceiverConfig {
  const config = parseEnv(schema, env);
  return {
    databaseUrl: config.DATABASE_URL,
    natsServers: config.NATS_URL,
    streamReplicas: config.DROVER_STREAM_REPLICAS,
    queuePrefix: config.DROVER_QUEUE_PREFIX,
    host: config.DROVER_RECEIVER_HOST,
    port: config.DROVER_RECEIVER_PORT,
    maxBodyBytes: config.DROVER_RECEIVER_MAX_BODY_BYTES,
  };
}
