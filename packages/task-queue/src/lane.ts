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
  /** Runs one message. It must ack, nak or term it; a throw naks it after a short delay. */
  handle(msg: JsMsg): Promise<void>;
  onError?(err: unknown): void;
}

export interface Lane {
  /** Stops pulling; running handlers continue. Resolves when they have all returned. */
  drain(): Promise<void>;
  readonly running: number;
}

/**
 * A bounded lane over the workers' durable pull consumer. It fetches only as many messages as it has
 * free slots: a message buffered behind a long task would burn its ack_wait and be redelivered
 * while it waits (the failure STACK.md warns about).
 */
export async function startLane(
  js: JetStreamClient,
  names: TaskQueueNames,
  options: LaneOptions,
): Promise<Lane> {
  let consumer: Consumer | undefined = await js.consumers.get(names.stream, names.consumer);
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  let wake: (() => void) | undefined;

  const run = (msg: JsMsg) => {
    // Keep the message leased while the task works; the handler may also call working() itself.
    const keepAlive = setInterval(() => msg.working(), ACK_WAIT_MS / 3);
    const p = options
      .handle(msg)
      .catch((err) => {
        options.onError?.(err);
        msg.nak(1_000);
      })
      .finally(() => {
        clearInterval(keepAlive);
        inFlight.delete(p);
        wake?.();
      });
    inFlight.add(p);
  };

  const loop = (async () => {
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
        for await (const msg of batch) {
          if (stopping) {
            // Pulled after the drain began: hand it straight back for another worker.
            msg.nak();
            continue;
          }
          run(msg);
        }
      } catch (err) {
        if (stopping) break;
        options.onError?.(err);
        consumer = undefined;
        await new Promise((r) => setTimeout(r, 500));
        await options.ensure?.().catch((e) => options.onError?.(e));
      }
    }
  })();

  let drained: Promise<void> | undefined;
  return {
    get running() {
      return inFlight.size;
    },
    drain() {
      drained ??= (async () => {
        stopping = true;
        wake?.();
        await loop;
        await Promise.allSettled([...inFlight]);
      })();
      return drained;
    },
  };
}
