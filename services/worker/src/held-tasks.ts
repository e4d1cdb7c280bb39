import type { Db } from "@drover/db";
import { type HeldClaim, handBackHeldTasks } from "@drover/engine";

/** What a held task's message lets the worker do when it gives the task back. */
export interface HeldMessage {
  nak(delayMs?: number): void;
}

/**
 * The tasks this worker has claimed and not yet ended, with their messages: what it must give back
 * if its grace time runs out before they hand themselves back.
 */
export class HeldTasks {
  private readonly held = new Map<number, { claimToken: string; msg: HeldMessage }>();

  get size(): number {
    return this.held.size;
  }

  /** The runner's onClaim for one message: holds the claim from the claim to the attempt's end. */
  tracker(msg: HeldMessage): (claim: HeldClaim | null) => void {
    let taskId: number | undefined;
    return (claim) => {
      if (claim) {
        taskId = claim.taskId;
        this.held.set(claim.taskId, { claimToken: claim.claimToken, msg });
      } else if (taskId !== undefined) {
        this.held.delete(taskId);
      }
    };
  }

  /**
   * Gives back, fenced by their claim tokens, the tasks still held, and naks their messages so the
   * broker offers them again at once. Returns the ids handed back; a task that ended meanwhile is
   * not among them.
   */
  async handBack(db: Db): Promise<number[]> {
    const claims = [...this.held].map(([taskId, h]) => ({ taskId, claimToken: h.claimToken }));
    const handedBack = await handBackHeldTasks(db, claims);
    for (const id of handedBack) {
      try {
        this.held.get(id)?.msg.nak();
      } catch {
        // the connection is closing; the dispatcher publishes the task again
      }
      this.held.delete(id);
    }
    return handedBack;
  }
}
