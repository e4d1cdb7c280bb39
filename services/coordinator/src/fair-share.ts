/**
 * How the pool's lane slots are shared among live runs: max-min fairness (progressive filling),
 * every run weighted equally, each tenant capped. Pure: the dispatcher reads the inputs from
 * Postgres and acts on the result.
 *
 * Whether a run's unused share is lent to the others depends on what bounds the pool. While the
 * workers wait on the source (latency, the budget), a slot nobody uses is throughput lost, so it is
 * lent. While they are busy (their event loops near full), slots are not what runs compete for:
 * every task a large run adds takes CPU from a small run's one task on the same worker, and a
 * 2,000-row run beside a 40,000-row one took 2.5× as long with every spare slot lent, 1.3× with the
 * large run held to an equal share (small_run_slowdown). So then each present run keeps its equal
 * share (`reserve`), used or not, and a busy pool loses little by it: it was bound by CPU anyway.
 */

/** What one live run has in flight and could use now. */
export interface RunDemand {
  runId: string;
  tenantId: string;
  /** Claimed and not ended. */
  running: number;
  /** Published and not yet claimed. */
  queued: number;
  /** Due tasks of its current phase not yet published. */
  ready: number;
  /**
   * Live now even if it wants nothing this instant: between two phases or two pages of a chain, a
   * task just ended or one is due in a moment. A run parked for hours (the daily budget, a follow
   * run between passes) is not present and reserves nothing.
   */
  present: boolean;
}

export interface ShareOptions {
  /** Lane slots of the workers alive now. */
  slots: number;
  /** At most this many tasks in flight (running + published) per tenant, over all its runs; 0: no cap. */
  tenantCap: number;
  /**
   * Keep every present run's equal share for it even where it wants less (the workers are busy):
   * a run gets at most that share, and what it leaves unused stays free.
   */
  reserve: boolean;
}

/**
 * Each run's target of tasks in flight (running + published): the pool's live lane slots, dealt
 * out one at a time, round after round, to every run that still wants more (its in-flight plus
 * ready tasks) and whose tenant is under the cap; in each round the runs with the fewest running
 * tasks go first, so the odd slots of an uneven split go to the ones served least now, not to the
 * same runs every time. A run that needs less than an equal share (a chain of one task at a time)
 * keeps what it needs and the rest goes to the others: a large run still gets every slot nobody
 * else wants, and a run alone gets the whole pool. While the workers are busy (`reserve`), a
 * present run's unused share stays free instead.
 *
 * No slot is dealt beyond the pool, so the work queue holds next to nothing: a slot a task frees
 * is refilled by its own run's next task (the worker publishes it at once, up to this share:
 * `handOnSlot`), or by the next round's pick, never by a backlog another run queued earlier.
 *
 * A target can be below what a run already has in flight (a new run arrived): nothing is taken
 * back, the run simply gets nothing more until its tasks end.
 */
export function fairShares(runs: readonly RunDemand[], options: ShareOptions): Map<string, number> {
  if (!options.reserve) return progressiveFill(runs, want, options);
  // Each present run's equal share, as if every one of them wanted the whole pool; then each run
  // takes what it wants of it.
  const pool = Math.max(0, options.slots);
  const ceilings = progressiveFill(runs, (r) => (isPresent(r) ? pool : 0), options);
  return new Map(runs.map((r) => [r.runId, Math.min(want(r), ceilings.get(r.runId) ?? 0)]));
}

/**
 * While shares are reserved, the count of running tasks above which a run's task gives its slot up
 * between windows even when no other run waits (overFairShare): an equal split of the pool among
 * the present runs, rounded up. Without it a large run would keep the slots it held when a small
 * one arrived until its long tasks end, which is most of a small run's life; rounded up, so an
 * uneven split (8 slots, 3 runs: 3, 3, 2), whose odd slots move between rounds, never makes a run
 * give up a slot it would be dealt again at once. Null when shares are lent or one run is present.
 */
export function shareCeiling(runs: readonly RunDemand[], options: ShareOptions): number | null {
  if (!options.reserve) return null;
  const present = runs.filter(isPresent).length;
  return present > 1 ? Math.ceil(Math.max(0, options.slots) / present) : null;
}

/** Tasks in flight plus ready: all a run could use now. */
const want = (r: RunDemand) => r.running + r.queued + r.ready;

/** A run wanting slots is present whatever its last move; one wanting none only if it moved lately. */
const isPresent = (r: RunDemand) => r.present || want(r) > 0;

/** Slots dealt one at a time, round after round, to the runs wanting more, the least served first. */
function progressiveFill(
  runs: readonly RunDemand[],
  wants: (r: RunDemand) => number,
  options: ShareOptions,
): Map<string, number> {
  const targets = new Map<string, number>(runs.map((r) => [r.runId, 0]));
  const active = runs.filter((r) => wants(r) > 0);
  let pool = Math.max(0, options.slots);
  const cap = options.tenantCap > 0 ? options.tenantCap : Number.POSITIVE_INFINITY;
  const perTenant = new Map<string, number>();
  const order = [...active].sort((a, b) => a.running - b.running);
  while (pool > 0) {
    let gave = false;
    for (const r of order) {
      if (pool === 0) break;
      const target = targets.get(r.runId)!;
      const tenantTotal = perTenant.get(r.tenantId) ?? 0;
      if (target >= wants(r) || tenantTotal >= cap) continue;
      targets.set(r.runId, target + 1);
      perTenant.set(r.tenantId, tenantTotal + 1);
      pool--;
      gave = true;
    }
    if (!gave) break;
  }
  return targets;
}
