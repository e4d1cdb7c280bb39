import type { Consumer, JetStreamClient, JsMsg } from "@nats-io/jetstream";
import type { TaskQueueNames } from "./names.js";
import { ACK_WAIT_MS } from "./stream.js";

export interface LaneOptions {
  /** How many tasks this process runs at once. */
  width: number;
  /**
   * Re-creates the stream and consumer. Called when fetching fails, so a worker outlives the
   * stream being deleted or a broker losing its state: Postgres still knows every task, and the
   * reaper publishes again what the broker lost.
   */
  ensure?(): Promise<void>;
  /**
   * How long fetching may keep failing, ensure() included, before the lane gives up and `failed`
   * resolves (default: two minutes). A worker that cannot get its consumer back must say so and
   * end, where a process manager sees it, instead of retrying unseen forever.
   */
  recoverForMs?: number;
  /** Runs one message. It must ack, nak or term it; a throw naks it after a short delay. */
  handle(msg: JsMsg): Promise<void>;
  onError?(err: unknown): void;
}

export interface Lane {
  /** Stops pulling (a message pulled meanwhile is nak'd back); running handlers continue. */
  stopPulling(): Promise<void>;
  /** Stops pulling, then resolves when every running handler has returned. */
  drain(): Promise<void>;
  /** Resolves with the last error once the lane gave up getting its consumer back; pulling has stopped. */
  readonly failed: Promise<Error>;
  readonly running: number;
}

const DEFAULT_RECOVER_FOR_MS = 120_000;
const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 5_000;

/**
 * A bounded lane over the workers' durable pull consumer. It fetches only as many messages as it has
 * free slots: a message buffered behind a long task would burn its ack_wait and be redelivered
 * while it waits (the failure STACK.md warns about).
 */
// biome-ignore lint/complexity/noExcessiveLinesPerFunction: the pull loop, the tasks in flight and the stop share one lane's state (free slots, the pull to cancel, the waker); each step is a small named closure over it, and pulling them apart would pass that state around instead
export async function startLane(
  js: JetStreamClient,
  names: TaskQueueNames,
  options: LaneOptions,
): Promise<Lane> {
  let consumer: Consumer | undefined = await js.consumers.get(names.stream, names.consumer);
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  /** The pull in flight, if any: a stop ends it instead of waiting out its expiry (up to a second). */
  let pull: { stop(): void } | undefined;
  let wake: (() => void) | undefined;
  let fail!: (err: Error) => void;
  const failed = new Promise<Error>((resolve) => {
    fail = resolve;
  });

  const run = (msg: JsMsg) => {
    // Keep the message leased while the task works; the handler may also call working() itself.
    // After a shutdown closed the connection the message is no longer ours to keep.
    const keepAlive = setInterval(() => quietly(() => msg.working()), ACK_WAIT_MS / 3);
    const p = options
      .handle(msg)
      .catch((err) => {
        options.onError?.(err);
        quietly(() => msg.nak(1_000));
      })
      .finally(() => {
        clearInterval(keepAlive);
        inFlight.delete(p);
        wake?.();
      });
    inFlight.add(p);
  };

  /** Resolves after `ms`, or as soon as the lane stops. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      wake = undefined;
    });

  const loop = (async () => {
    let failingSince: number | undefined;
    let retryMs = FIRST_RETRY_MS;
    while (!stopping) {
      const free = options.width - inFlight.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      try {
        consumer ??= await js.consumers.get(names.stream, names.consumer);
        const batch = await consumer.fetch({ max_messages: free, expires: 1_000 });
        pull = batch;
        if (stopping) batch.stop();
        for await (const msg of batch) {
          if (stopping) {
            // Pulled after the drain began: hand it straight back for another worker.
            quietly(() => msg.nak());
            continue;
          }
          run(msg);
        }
        pull = undefined;
        failingSince = undefined;
        retryMs = FIRST_RETRY_MS;
      } catch (err) {
        pull = undefined;
        if (stopping) break;
        options.onError?.(err);
        consumer = undefined;
        failingSince ??= Date.now();
        if (Date.now() - failingSince >= (options.recoverForMs ?? DEFAULT_RECOVER_FOR_MS)) {
          stopping = true;
          fail(err instanceof Error ? err : new Error(String(err)));
          break;
        }
        await pause(retryMs);
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
        if (!stopping) await options.ensure?.().catch((e) => options.onError?.(e));
      }
    }
  })();

  let pulling: Promise<void> | undefined;
  let drained: Promise<void> | undefined;
  const stopPulling = () => {
    pulling ??= (async () => {
      stopping = true;
      wake?.();
      // Stopping the pull unsubscribes its inbox, and the server hands a waiting pull nothing once
      // its reply subject has no interest (nats-server's nextWaiting). A message already on its way
      // is either yielded here (and nak'd above) or dropped with the subscription and redelivered
      // after ack_wait; the task's row in Postgres has it either way.
      pull?.stop();
      await loop;
    })();
    return pulling;
  };
  return {
    get running() {
      return inFlight.size;
    },
    failed,
    stopPulling,
    drain() {
      drained ??= (async () => {
        await stopPulling();
        await Promise.allSettled([...inFlight]);
      })();
      return drained;
    },
  };
}

/** A message verb on a connection that may already be closed: nothing left to tell the broker. */
function quietly(verb: () => void): void {
  try {
    verb();
  } catch {
    // the connection is closed; the broker redelivers after ack_wait if it must
  }
}
