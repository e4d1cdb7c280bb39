import type { NatsConnection } from "@nats-io/transport-node";
import type { TaskQueueNames } from "./names.js";

/**
 * A source account walled off: nothing may be sent to it before `until` (epoch ms). The leader
 * coordinator announces it when a worker reports a refusal, so every worker drops the slots it
 * already holds for the account.
 */
export interface BudgetWall {
  source: string;
  account: string;
  until: number;
}

/**
 * Announces a wall on core NATS (not the stream): a worker that misses it still meets the wall
 * through its next lease, so at-most-once delivery is enough.
 */
export function publishBudgetWall(
  nc: Pick<NatsConnection, "publish">,
  names: TaskQueueNames,
  wall: BudgetWall,
): void {
  const message: BudgetWall = { source: wall.source, account: wall.account, until: wall.until };
  nc.publish(names.budgetWallSubject, JSON.stringify(message));
}

/** The wall a message announces, or undefined for anything else. */
export function parseBudgetWall(data: Uint8Array): BudgetWall | undefined {
  try {
    const value = JSON.parse(new TextDecoder().decode(data)) as Partial<BudgetWall>;
    if (
      typeof value.source === "string" &&
      typeof value.account === "string" &&
      typeof value.until === "number" &&
      Number.isFinite(value.until)
    ) {
      return { source: value.source, account: value.account, until: value.until };
    }
  } catch {
    // not JSON: not a wall
  }
  return undefined;
}
