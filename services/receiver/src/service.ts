import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { openDatabase } from "@drover/db";
import { ensureWebhookEventStream, webhookEventNames } from "@drover/task-queue";
import type { Logger } from "@drover/telemetry";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { ReceiverConfig } from "./config.js";
import { WebhookReceiver } from "./receiver.js";

export interface RunningReceiver {
  url: string;
  receiver: WebhookReceiver;
  stop(): Promise<void>;
}

/** Starts the receiver: the event stream ensured, then the HTTP server listening. */
export async function startReceiver(config: ReceiverConfig, logger: Logger): Promise<RunningReceiver> {
  // A small pool: one indexed read per delivery (cached a few seconds per run).
  const database = openDatabase(config.databaseUrl, { max: 4, applicationName: "drover-receiver" });
  const nc = await connect({
    servers: config.natsServers,
    name: "drover-receiver",
    maxReconnectAttempts: -1,
  });
  const names = webhookEventNames(config.queuePrefix);
  await ensureWebhookEventStream(await jetstreamManager(nc), names, {
    replicas: config.streamReplicas,
  });
  const receiver = new WebhookReceiver({
    db: database.db,
    js: jetstream(nc),
    names,
    logger,
    maxBodyBytes: config.maxBodyBytes,
  });
  const server: Server = createServer(receiver.handle);
  // Pipedrive waits 10 s for an answer; a client that sends nothing for that long is not it.
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = config.host === "0.0.0.0" ? "127.0.0.1" : config.host;
  return {
    url: `http://${host}:${port}`,
    receiver,
    stop: async () => {
      // Deliveries in hand finish (each is stored, then answered); idle keep-alive sockets do not hold the stop.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await closed;
      await nc.drain();
      await database.close();
    },
  };
}
