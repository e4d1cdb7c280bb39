import type { Db } from "@drover/db";
import {
  DISPATCH_LOCK,
  liveLaneSlots,
  markTasksDispatched,
  recordFairShares,
  runDemand,
  runDispatchLock,
  undispatchTasks,
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
  /** Re-creates the stream when publishing fails (someone deleted it, the broker lost it). */
  ensureQueue(): Promise<void>;
}

export type FairShareMode = "adaptive" | "reserve" | "lend";

/**
 * Dispatch rounds, coalesced: every task that ends asks for a round, and under a large run they
 * end many times a second, each round serialized behind the others by the lock. A request made
 * while a round is running joins the one round that starts after it (which sees everything the
 * requester committed before asking), so a burst of requests costs two rounds, not one each, and a
 * small run's next task is not queued behind a large run's rounds.
 */
export function coalescedDispatch(deps: DispatcherDeps): () => Promise<number> {
  let running: Promise<number> | undefined;
  let next: Promise<number> | undefined;
  const start = (): Promise<number> => {
    const round = dispatch(deps).finally(() => {
      if (running === round) running = undefined;
    });
    running = round;
    return round;
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
 * One dispatch round: reads what every running run has in flight and ready, deals the live
 * workers' lane slots out among them (fair-share.ts: equal shares of what runs need, the tenant
 * cap), records each run's share (runs.fair_share, up to which a worker whose task ends publishes
 * the run's next tasks itself), marks each run's deficit as published in the same transaction,
 * then publishes, interleaving the runs (one task of each in turn, the runs served least first)
 * so the FIFO work queue serves them round-robin. No more than the pool is published, and workers
 * pull only as many messages as they have free slots, so the queue holds no backlog a small run's
 * task would wait behind. Publishing twice is harmless (the claim is fenced); publishing too few
 * stalls a run, so a task whose publish fails is unmarked for the next round.
 */
export async function dispatch(deps: DispatcherDeps): Promise<number> {
  const rounds = await deps.db.transaction(async (tx) => {
    await tx.execute(DISPATCH_LOCK);
    const live = await liveLaneSlots(tx);
    const slots = Math.max(live.slots, deps.laneWidth);
    // No run can be given more than the whole pool: its ready tasks are counted up to that.
    const demand = await runDemand(tx, slots + 1);
    if (demand.length === 0) return [];
    const reserve = deps.fairShare === "reserve" || (deps.fairShare === "adaptive" && live.busy);
    const options = { slots, tenantCap: deps.tenantCap, reserve };
    const targets = fairShares(demand, options);
    await recordFairShares(tx, targets, shareCeiling(demand, options));
    const picked: { runId: string; ids: number[]; traceContext: Record<string, string> | null }[] = [];
    // The runs served least now publish first: their task leads each turn of the interleave.
    for (const run of [...demand].sort((a, b) => a.running - b.running)) {
      const target = targets.get(run.runId) ?? 0;
      if (run.ready === 0 || target <= run.running + run.queued) continue;
      await tx.execute(runDispatchLock(run.runId));
      const marked = await markTasksDispatched(tx, run.runId, target);
      if (marked.ids.length > 0)
        picked.push({ runId: run.runId, ids: marked.ids, traceContext: run.traceContext });
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
  const failed: number[] = [];
  let published = 0;
  const longest = Math.max(...rounds.map((r) => r.ids.length));
  for (let i = 0; i < longest; i++) {
    for (const r of rounds) {
      const taskId = r.ids[i];
      if (taskId === undefined) continue;
      try {
        await publishTask(deps.js, deps.names, { taskId, runId: r.runId }, headers.get(r.runId));
        published++;
      } catch {
        failed.push(taskId);
      }
    }
  }
  if (failed.length > 0) {
    await deps.ensureQueue().catch(() => {});
    await undispatchTasks(deps.db, failed);
  }
  return published;
}
