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

export interface TaskQueueOptions {
  /**
   * Copies of the stream (and so of its consumer, which follows the stream's count), each on its own
   * server: 3 on a three-node cluster, 1 on a single server (default).
   */
  replicas?: number;
}

/**
 * The task stream's configuration disagrees with what is asked: it was made with another replica
 * count, or the servers cannot keep as many copies. Not retryable: the configuration must change.
 */
export class TaskQueueConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TaskQueueConfigError";
  }
}

/**
 * Creates (or confirms) the work-queue stream and the workers' durable pull consumer. Idempotent,
 * so coordinators and workers both call it at start in any order.
 *
 * An existing stream with another replica count is refused, not changed: processes of one
 * deployment that disagree would otherwise resize it back and forth, and one started without the
 * setting (default 1) would quietly take a cluster's stream down to a single copy.
 */
export async function ensureTaskQueue(
  jsm: JetStreamManager,
  names: TaskQueueNames,
  options: TaskQueueOptions = {},
): Promise<void> {
  const replicas = options.replicas ?? 1;
  const config = {
    name: names.stream,
    subjects: [`${names.subjectPrefix}.>`],
    // A message leaves the stream once acked: the stream is a queue of assignments, not a log.
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    num_replicas: replicas,
  };
  let existing = await jsm.streams.info(names.stream).catch(() => undefined);
  if (!existing) {
    try {
      existing = await jsm.streams.add(config);
    } catch (err) {
      // Another process created it between our info and add.
      existing = await jsm.streams.info(names.stream).catch(() => undefined);
      if (!existing) {
        if (replicas > 1 && /replicas|cluster|peers|insufficient resources/i.test(String(err)))
          throw new TaskQueueConfigError(
            `the task stream ${names.stream} cannot keep ${replicas} replicas (DROVER_STREAM_REPLICAS=${replicas}): that needs a NATS cluster of at least ${replicas} JetStream servers, all up; NATS said: ${(err as Error).message}. Point NATS_URL at such a cluster or set DROVER_STREAM_REPLICAS=1 for a single server`,
          );
        throw err;
      }
    }
  }
  const kept = existing.config.num_replicas || 1;
  if (kept !== replicas)
    throw new TaskQueueConfigError(
      `the task stream ${names.stream} keeps ${kept} replica(s) but DROVER_STREAM_REPLICAS is ${replicas}: set DROVER_STREAM_REPLICAS=${kept} on every coordinator and worker, or change the stream's replicas first (nats stream edit ${names.stream} --replicas ${replicas})`,
    );
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
