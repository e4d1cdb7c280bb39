import type { Db } from "@drover/db";
import {
  type DispatchSlice,
  dispatchLock,
  liveLaneSlots,
  markRunDeficits,
  recordFairShares,
  runDemand,
  runSlice,
  slicePool,
  undispatchTasks,
  WHOLE_POOL,
} from "@drover/engine";
import { publishTask, type TaskQueueNames } from "@drover/task-queue";
import { Attr, extractTraceContext, injectTraceContext, SpanKind, withSpan } from "@drover/telemetry";
import type { JetStreamClient } from "@nats-io/jetstream";
import { fairShares, shareCeiling } from "./fair-share.js";

export interface DispatcherDeps {
  db: Db;
  js: JetStreamClient;
  names: TaskQueueNames;
  /** The workers' lane width: the pool is never taken for smaller than one worker's lane. */
  laneWidth: number;
  /** DROVER_TENANT_MAX_INFLIGHT: tasks in flight per tenant over all its runs; 0 for no cap. */
  tenantCap: number;
  /**
   * DROVER_FAIR_SHARE: whether a live run's unused share is lent to the others (`lend`), kept free
   * for it (`reserve`), or lent only while no live worker reports its event loop busy (`adaptive`).
   */
  fairShare: FairShareMode;
  /** DROVER_DISPATCH_SLICES: the live runs are dealt out in this many slices by tenant (task-dispatch.ts). */
  slices: number;
  /** Re-creates the stream when publishing fails (someone deleted it, the broker lost it). */
  ensureQueue(): Promise<void>;
}

export type FairShareMode = "adaptive" | "reserve" | "lend";

/**
 * Dispatch rounds, coalesced per slice: every task that ends asks for a round of its run's slice,
 * and under a large run they end many times a second, each round serialized behind the others by
 * the slice's lock. A request made while a round is running joins the one round that starts after
 * it (which sees everything the requester committed before asking), so a burst of requests costs
 * two rounds, not one each, and a small run's next task is not queued behind a large run's rounds.
 * A request that names no run (the reaper's pass, a follow feed's events) asks every slice.
 */
export function coalescedDispatch(deps: DispatcherDeps): (runId?: string) => Promise<number> {
  const count = Math.max(1, deps.slices);
  const slices = Array.from({ length: count }, (_, index) =>
    coalesced(() => dispatch(deps, { index, count })),
  );
  // A run's tenant never changes, so neither does its slice: looked up once per run.
  const sliceOfRun = new Map<string, number>();
  return async (runId?: string) => {
    if (slices.length === 1) return slices[0]!();
    if (runId === undefined) {
      let published = 0;
      for (const round of slices) published += await round();
      return published;
    }
    let index = sliceOfRun.get(runId);
    if (index === undefined) {
      index = await runSlice(deps.db, runId, slices.length);
      if (index === undefined) return 0;
      if (sliceOfRun.size >= 10_000) sliceOfRun.clear();
      sliceOfRun.set(runId, index);
    }
    return slices[index]!();
  };
}

function coalesced(round: () => Promise<number>): () => Promise<number> {
  let running: Promise<number> | undefined;
  let next: Promise<number> | undefined;
  const start = (): Promise<number> => {
    const current = round().finally(() => {
      if (running === current) running = undefined;
    });
    running = current;
    return current;
  };
  return () => {
    if (!running) return start();
    next ??= running
      .catch(() => 0)
      .then(() => {
        next = undefined;
        return start();
      });
    return next;
  };
}

/**
 * One dispatch round of a slice: reads what every running run of the slice has in flight and
 * ready, deals the slice's part of the live workers' lane slots (slicePool) out among them (fair-share.ts: equal shares of what runs need, the tenant
 * cap), records each run's share (runs.fair_share, up to which a worker whose task ends publishes
 * the run's next tasks itself), marks each run's deficit as published in the same transaction,
 * then publishes, interleaving the runs (one task of each in turn, the runs served least first)
 * so the FIFO work queue serves them round-robin. No more than the pool is published, and workers
 * pull only as many messages as they have free slots, so the queue holds no backlog a small run's
 * task would wait behind. Publishing twice is harmless (the claim is fenced); publishing too few
 * stalls a run, so a task whose publish fails is unmarked for the next round.
 */
export async function dispatch(deps: DispatcherDeps, slice: DispatchSlice = WHOLE_POOL): Promise<number> {
  const rounds = await deps.db.transaction(async (tx) => {
    await tx.execute(dispatchLock(slice));
    const live = await liveLaneSlots(tx);
    const slots = await slicePool(tx, slice, Math.max(live.slots, deps.laneWidth));
    if (slots === 0) return [];
    // No run can be given more than the whole pool: its ready tasks are counted up to that.
    const demand = await runDemand(tx, slots + 1, slice);
    if (demand.length === 0) return [];
    const reserve = deps.fairShare === "reserve" || (deps.fairShare === "adaptive" && live.busy);
    const options = { slots, tenantCap: deps.tenantCap, reserve };
    const targets = fairShares(demand, options);
    await recordFairShares(tx, targets, shareCeiling(demand, options));
    // The runs served least now publish first: their task leads each turn of the interleave.
    const order = demand
      .filter((run) => run.ready > 0 && (targets.get(run.runId) ?? 0) > run.running + run.queued)
      .sort((a, b) => a.running - b.running);
    const marked = await markRunDeficits(
      tx,
      order.map((run) => ({ runId: run.runId, target: targets.get(run.runId) ?? 0 })),
    );
    const picked: { runId: string; ids: number[]; traceContext: Record<string, string> | null }[] = [];
    for (const run of order) {
      const ids = marked.get(run.runId);
      if (ids?.length) picked.push({ runId: run.runId, ids, traceContext: run.traceContext });
    }
    return picked;
  });
  if (rounds.length === 0) return 0;

  // Each run's tasks carry its own trace (StartRun → dispatch → the worker's task).
  const headers = new Map<string, Record<string, string>>();
  for (const r of rounds) {
    headers.set(
      r.runId,
      await withSpan(
        "dispatch",
        { [Attr.runId]: r.runId, "drover.dispatched": r.ids.length },
        async () => injectTraceContext(),
        { parent: extractTraceContext(r.traceContext ?? {}), kind: SpanKind.PRODUCER },
      ),
    );
  }
  // Sent in the interleave's order on one connection, their acknowledgements awaited together: a
  // round's publishes cost one round trip to the broker, not one each.
  const sends: { taskId: number; sent: Promise<void> }[] = [];
  const longest = Math.max(...rounds.map((r) => r.ids.length));
  for (let i = 0; i < longest; i++) {
    for (const r of rounds) {
      const taskId = r.ids[i];
      if (taskId === undefined) continue;
      sends.push({
        taskId,
        sent: publishTask(deps.js, deps.names, { taskId, runId: r.runId }, headers.get(r.runId)),
      });
    }
  }
  const settled = await Promise.allSettled(sends.map((s) => s.sent));
  const failed = sends.filter((_, i) => settled[i]!.status === "rejected").map((s) => s.taskId);
  const published = sends.length - failed.length;
  if (failed.length > 0) {
    await deps.ensureQueue().catch(() => {});
    await undispatchTasks(deps.db, failed);
  }
  return published;
}
