import { randomUUID } from "node:crypto";
import { type Database, openDatabase } from "@drover/db";
import { heartbeatWorker, registerWorker, removeWorker } from "@drover/engine";
import type { Logger } from "@drover/telemetry";
import { EventLoopLoad } from "./event-loop-load.js";

/** Heartbeats per liveness timeout: four may be lost or late before the record expires. */
export const HEARTBEATS_PER_LIVENESS = 5;

export interface WorkerLivenessOptions {
  databaseUrl: string;
  workerId: string;
  laneWidth: number;
  /** How long the record lives without a heartbeat: DROVER_WORKER_LIVENESS_MS. */
  livenessMs: number;
  logger: Logger;
}

/**
 * This worker's liveness record (drover.workers): registered before the lane pulls, moved forward
 * every fifth of the liveness timeout, removed once the worker has drained. The heartbeat has a
 * connection of its own, so a lane whose every connection sits in a long window cannot starve it:
 * a slow worker stays alive, only a dead or frozen one lets its record expire.
 *
 * When a heartbeat finds the record expired (the process was frozen, or cut off from the database,
 * for longer than the timeout), the reaper has released or will release every task it held, and
 * its claims are refused: the worker registers again under a new id and goes on with new tasks.
 * The attempts it was running learn at their next touch or window that their claims are gone.
 */
export class WorkerLiveness {
  private id: string = randomUUID();
  private readonly database: Database;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Whether the event loop is busy, carried by every heartbeat and sent at once when it changes. */
  private readonly load = new EventLoopLoad(() => void this.beat());

  constructor(private readonly options: WorkerLivenessOptions) {
    this.database = openDatabase(options.databaseUrl, { max: 1, applicationName: "drover-worker-liveness" });
  }

  /** The current record's id, for claims. */
  get record(): string {
    return this.id;
  }

  get heartbeatMs(): number {
    return Math.max(100, Math.floor(this.options.livenessMs / HEARTBEATS_PER_LIVENESS));
  }

  /** Registers the record and starts the heartbeat. */
  async start(): Promise<void> {
    await this.register();
    this.load.start();
    this.schedule();
  }

  /** One heartbeat now (the timer calls it too); never throws. */
  beat(): Promise<void> {
    this.beating = this.beating.then(async () => {
      if (this.stopped) return;
      try {
        if (await heartbeatWorker(this.database.db, this.id, this.options.livenessMs, this.load.busy)) return;
        const dead = this.id;
        this.id = randomUUID();
        this.options.logger.warn(
          { record: dead, next_record: this.id },
          "this worker's liveness record expired (frozen or cut off for longer than DROVER_WORKER_LIVENESS_MS): its tasks are handed on; registering again",
        );
        await this.register();
      } catch (err) {
        // Unreachable database: the next beat tries again; past the timeout the record expires.
        this.options.logger.warn({ err: String(err) }, "liveness heartbeat failed");
      }
    });
    return this.beating;
  }

  /** Stops the heartbeat and removes the record: call once the worker holds no task. Never throws. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.load.stop();
    if (this.timer) clearTimeout(this.timer);
    await this.beating;
    await removeWorker(this.database.db, this.id).catch((err) =>
      this.options.logger.warn({ err: String(err) }, "removing the liveness record failed; it expires"),
    );
    await this.database.close();
  }

  private register(): Promise<void> {
    return registerWorker(this.database.db, {
      id: this.id,
      workerId: this.options.workerId,
      laneWidth: this.options.laneWidth,
      livenessMs: this.options.livenessMs,
    });
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.beat().finally(() => this.schedule());
    }, this.heartbeatMs);
  }
}
