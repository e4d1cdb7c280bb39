/**
 * How the pool's lane slots are shared among live runs: max-min fairness (progressive filling),
 * every run weighted equally, each tenant capped. Pure: the dispatcher reads the inputs from
 * Postgres and acts on the result.
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
}

export interface ShareOptions {
  /** Lane slots of the workers alive now. */
  slots: number;
  /** At most this many tasks in flight (running + published) per tenant, over all its runs; 0: no cap. */
  tenantCap: number;
}

/**
 * Each run's target of tasks in flight (running + published): the pool's live lane slots, dealt
 * out one at a time, round after round, to every run that still wants more (its in-flight plus
 * ready tasks) and whose tenant is under the cap; in each round the runs with the fewest running
 * tasks go first, so the odd slots of an uneven split go to the ones served least now, not to the
 * same runs every time. A run that needs less than an equal share (a chain of one task at a time)
 * keeps what it needs and the rest goes to the others: a large run still gets every slot nobody
 * else wants, and a run alone gets the whole pool.
 *
 * No slot is dealt beyond the pool, so the work queue holds next to nothing: a slot a task frees
 * is refilled by its own run's next task (the worker publishes it at once, up to this share:
 * `handOnSlot`), or by the next round's pick, never by a backlog another run queued earlier.
 *
 * A target can be below what a run already has in flight (a new run arrived): nothing is taken
 * back, the run simply gets nothing more until its tasks end.
 */
export function fairShares(runs: readonly RunDemand[], options: ShareOptions): Map<string, number> {
  const targets = new Map<string, number>(runs.map((r) => [r.runId, 0]));
  const want = (r: RunDemand) => r.running + r.queued + r.ready;
  const active = runs.filter((r) => want(r) > 0);
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
      if (target >= want(r) || tenantTotal >= cap) continue;
      targets.set(r.runId, target + 1);
      perTenant.set(r.tenantId, tenantTotal + 1);
      pool--;
      gave = true;
    }
    if (!gave) break;
  }
  return targets;
}
