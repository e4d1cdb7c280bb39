import { intVar, NATS_SETTINGS, parseEnv, postgresUrl, z } from "@drover/config";

const schema = z.object({
  DATABASE_URL: postgresUrl("postgres://postgres@127.0.0.1:5432/drover"),
  ...NATS_SETTINGS,
  /** The queue prefix every process of the deployment shares (the event stream is named from it). */
  DROVER_QUEUE_PREFIX: z
    .string()
    .default("drover")
    .refine((v) => /^[a-zA-Z0-9_-]+$/.test(v), { message: 'may only contain letters, digits, "_" and "-"' }),
  DROVER_RECEIVER_HOST: z.string().default("0.0.0.0"),
  DROVER_RECEIVER_PORT: intVar(0, 65_535, 8088),
  /** Largest delivery accepted (413 above): Pipedrive's events are a few kilobytes. */
  DROVER_RECEIVER_MAX_BODY_BYTES: intVar(1_024, 10 * 1024 * 1024, 256 * 1024),
});

export type ReceiverConfig = z.infer<typeof schema>;

export function loadReceiverConfig(env: NodeJS.ProcessEnv = process.env): ReceiverConfig {
  return parseEnv(schema, env);
}
