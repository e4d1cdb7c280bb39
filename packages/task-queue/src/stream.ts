import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import type { TaskQueueNames } from "./names.js";

/**
 * How long a worker may hold a message without calling working(). Workers signal progress every
 * ACK_WAIT/3, so only a dead or frozen worker lets it lapse; then JetStream redelivers, and the
 * database claim decides whether the redelivery may run.
 */
export const ACK_WAIT_MS = 30_000;

/**
 * Creates (or confirms) the work-queue stream and the workers' durable pull consumer. Idempotent,
 * so coordinators and workers both call it at start in any order.
 */
export async function ensureTaskQueue(jsm: JetStreamManager, names: TaskQueueNames): Promise<void> {
  const config = {
    name: names.stream,
    subjects: [`${names.subjectPrefix}.>`],
    // A message leaves the stream once acked: the stream is a queue of assignments, not a log.
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
  };
  try {
    await jsm.streams.info(names.stream);
  } catch {
    try {
      await jsm.streams.add(config);
    } catch (err) {
      // Another process created it between our info and add.
      await jsm.streams.info(names.stream).catch(() => {
        throw err;
      });
    }
  }
  await jsm.consumers.add(names.stream, {
    durable_name: names.consumer,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(ACK_WAIT_MS),
    // The database decides attempts; a message must never be dropped by the broker for redelivering.
    max_deliver: -1,
    max_ack_pending: 10_000,
  });
}
