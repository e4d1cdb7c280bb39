import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { TaskQueueConfigError } from "./stream.js";

/**
 * Where the receiver (services/receiver) puts the source's webhook deliveries, each under its
 * run's subject: `<prefix>.webhooks.<runId>`. A work-queue stream on file storage: a delivery is
 * answered 2xx only once JetStream has stored it, and leaves once the follow run's consumer has
 * turned it into work.
 */
export interface WebhookEventNames {
  stream: string;
  subjectPrefix: string;
  consumer: string;
}

export function webhookEventNames(prefix = "drover"): WebhookEventNames {
  if (!/^[a-zA-Z0-9_-]+$/.test(prefix))
    throw new Error(`queue prefix "${prefix}" may only contain letters, digits, "_" and "-"`);
  return {
    stream: `${prefix.toUpperCase().replace(/-/g, "_")}_WEBHOOK_EVENTS`,
    subjectPrefix: `${prefix}.webhooks`,
    consumer: `${prefix}-webhook-events`,
  };
}

/**
 * How long JetStream remembers an event id to drop its duplicate (Nats-Msg-Id). Pipedrive retries
 * a delivery it saw fail after 3, 30 and 150 s: one the receiver stored but could not answer (a
 * crash between the store and the 2xx) comes back within 183 s. Ten minutes covers that with room.
 */
export const WEBHOOK_DUPLICATE_WINDOW_MS = 10 * 60_000;

/** Events nobody consumed for a week are dropped: a run that long without a consumer reconciles by polling. */
const MAX_AGE_MS = 7 * 24 * 3_600_000;

/** Creates (or confirms) the event stream and its consumer; idempotent, any process may call it. */
export async function ensureWebhookEventStream(
  jsm: JetStreamManager,
  names: WebhookEventNames,
  options: { replicas?: number } = {},
): Promise<void> {
  const replicas = options.replicas ?? 1;
  let existing = await jsm.streams.info(names.stream).catch(() => undefined);
  if (!existing) {
    try {
      existing = await jsm.streams.add({
        name: names.stream,
        subjects: [`${names.subjectPrefix}.>`],
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        num_replicas: replicas,
        duplicate_window: nanos(WEBHOOK_DUPLICATE_WINDOW_MS),
        max_age: nanos(MAX_AGE_MS),
      });
    } catch (err) {
      existing = await jsm.streams.info(names.stream).catch(() => undefined);
      if (!existing) throw err;
    }
  }
  const kept = existing.config.num_replicas || 1;
  if (kept !== replicas)
    throw new TaskQueueConfigError(
      `the webhook event stream ${names.stream} keeps ${kept} replica(s) but DROVER_STREAM_REPLICAS is ${replicas}: set DROVER_STREAM_REPLICAS=${kept} everywhere, or change the stream first (nats stream edit ${names.stream} --replicas ${replicas})`,
    );
  await jsm.consumers.add(names.stream, {
    durable_name: names.consumer,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(30_000),
    max_deliver: -1,
    max_ack_pending: 10_000,
  });
}

export function webhookEventSubject(names: WebhookEventNames, runId: string): string {
  return `${names.subjectPrefix}.${runId}`;
}

/**
 * Stores one delivery durably (resolves once JetStream acknowledged it). `eventId` is the source's
 * event id (Pipedrive's meta.id): a second delivery of it inside the duplicate window is dropped by
 * JetStream and reported `duplicate`.
 */
export async function publishWebhookEvent(
  js: JetStreamClient,
  names: WebhookEventNames,
  runId: string,
  eventId: string,
  body: Uint8Array | string,
): Promise<{ duplicate: boolean }> {
  const ack = await js.publish(webhookEventSubject(names, runId), body, { msgID: `${runId}:${eventId}` });
  return { duplicate: ack.duplicate };
}
