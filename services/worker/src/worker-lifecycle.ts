/**
 * Where a worker is in its life, as Temporal's worker names it:
 * - INITIALIZED: connecting to the database, the broker and the coordinator;
 * - RUNNING: pulling and running tasks;
 * - STOPPING: told to stop: pulling ends, running tasks are asked to hand themselves back;
 * - DRAINING: waiting, up to the grace time, for the running tasks to end or hand back;
 * - DRAINED: holds no task any more (the ones past the grace time were handed back for it);
 * - STOPPED: connections closed after a requested stop;
 * - FAILED: the worker could not go on (its queue consumer could not be re-created) and shut
 *   itself down through the same stages; its process exits non-zero.
 */
export type WorkerState =
  | "INITIALIZED"
  | "RUNNING"
  | "STOPPING"
  | "DRAINING"
  | "DRAINED"
  | "STOPPED"
  | "FAILED";

const NEXT: Readonly<Record<WorkerState, readonly WorkerState[]>> = {
  INITIALIZED: ["RUNNING", "FAILED"],
  RUNNING: ["STOPPING"],
  STOPPING: ["DRAINING"],
  DRAINING: ["DRAINED"],
  DRAINED: ["STOPPED", "FAILED"],
  STOPPED: [],
  FAILED: [],
};

export class WorkerLifecycle {
  private current: WorkerState = "INITIALIZED";

  constructor(private readonly onChange: (from: WorkerState, to: WorkerState) => void = () => {}) {}

  get state(): WorkerState {
    return this.current;
  }

  /** Moves on; a move the lifecycle does not allow is a bug in the worker and throws. */
  moveTo(next: WorkerState): void {
    if (!NEXT[this.current].includes(next)) {
      throw new Error(`a worker cannot go from ${this.current} to ${next}`);
    }
    const from = this.current;
    this.current = next;
    this.onChange(from, next);
  }
}
