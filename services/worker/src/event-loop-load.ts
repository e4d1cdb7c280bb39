import { performance } from "node:perf_hooks";

/** A sample of the loop this full makes the worker busy… */
export const BUSY_ABOVE = 0.8;
/** …and it stays busy until the loop's mean over the last IDLE_SAMPLES samples falls below this. */
export const IDLE_BELOW = 0.5;
/** How often the loop's utilization is read (each reading covers the time since the last one). */
export const LOAD_SAMPLE_MS = 250;
/** Samples the way back to idle is judged on: a second's worth. */
export const IDLE_SAMPLES = 4;

/**
 * The next busy state after a sample of the event loop's utilization (0–1), given the mean of the
 * latest samples. Quick to turn busy (one full sample: a large run ramping up is seen within a
 * quarter of a second, before a small run beside it has lost much), slow to turn idle (a second's
 * mean under the lower threshold). Two thresholds, not one: a loaded worker's reading swings
 * between samples, and each swing of the pool's state would move fair shares back and forth, every
 * time making a run's tasks give their slots up and read a page again.
 */
export function nextBusy(busy: boolean, sample: number, recentMean: number): boolean {
  return busy ? recentMean >= IDLE_BELOW : sample > BUSY_ABOVE;
}

/**
 * Whether this worker's event loop is near full: the process is bound by its CPU, not by the
 * source or the database it waits on. The liveness record carries it (drover.workers.busy) and the
 * dispatcher reads it to decide whether a run's unused share may be lent (fair-share.ts). A change
 * is reported at once (`onChange`), not at the next heartbeat seconds later.
 */
export class EventLoopLoad {
  private state = false;
  private last = performance.eventLoopUtilization();
  private readonly recent: number[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly onChange: (busy: boolean) => void,
    private readonly sampleMs = LOAD_SAMPLE_MS,
  ) {}

  get busy(): boolean {
    return this.state;
  }

  start(): void {
    this.last = performance.eventLoopUtilization();
    this.timer = setInterval(() => this.sample(), this.sampleMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Reads the utilization since the previous sample and moves the state (the timer calls it). */
  sample(): number {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, this.last);
    this.last = now;
    this.recent.push(utilization);
    if (this.recent.length > IDLE_SAMPLES) this.recent.shift();
    const mean = this.recent.reduce((a, b) => a + b, 0) / this.recent.length;
    const next = nextBusy(this.state, utilization, mean);
    if (next !== this.state) {
      this.state = next;
      this.onChange(next);
    }
    return utilization;
  }
}
