import { loadReceiverConfig, type RunningReceiver, startReceiver } from "@drover/receiver";
import { createLogger } from "@drover/telemetry";

export interface TestReceiverOptions {
  databaseUrl: string;
  /** The cluster's queue prefix: the receiver stores events in that cluster's event stream. */
  queuePrefix: string;
  /** The port the coordinators' DROVER_WEBHOOK_PUBLIC_URL names. */
  port: number;
  natsUrl?: string;
  logLevel?: "silent" | "warn";
}

/**
 * The webhook receiver (services/receiver) in this process, on 127.0.0.1:`port`, beside a cluster
 * whose coordinators register webhooks at that address: what the follow tests, the chaos follow
 * runs and the follow benches start, configured as its service would be.
 */
export function startTestReceiver(options: TestReceiverOptions): Promise<RunningReceiver> {
  return startReceiver(
    loadReceiverConfig({
      DATABASE_URL: options.databaseUrl,
      NATS_URL: options.natsUrl ?? process.env.NATS_URL ?? "127.0.0.1:4222",
      DROVER_QUEUE_PREFIX: options.queuePrefix,
      DROVER_RECEIVER_HOST: "127.0.0.1",
      DROVER_RECEIVER_PORT: String(options.port),
    }),
    createLogger("receiver", { level: options.logLevel ?? "silent" }),
  );
}
