import type { RunFollow } from "@drover/db";
import { insertTaskSeeds } from "@drover/engine";
import { eventSeeds, kindOfWebhookEntity } from "@drover/providers";
import type { WebhookEventNames } from "@drover/task-queue";
import type { JetStreamClient, JsMsg } from "@nats-io/jetstream";
import { sql } from "drizzle-orm";
import type { CoordinatorContext } from "./context.js";

/** How long an event of a run still importing waits before it is looked at again. */
const IMPORTING_RETRY_MS = 5_000;

/** What one pass over the event stream did. */
export interface EventsPass {
  taken: number;
  /** Tasks seeded from them. */
  seeded: number;
  /** Events of runs that no longer follow (ended, stopped, cut over) or of objects no run imports. */
  dropped: number;
  /** Events of runs still importing, left for later. */
  deferred: number;
}

interface RunEvents {
  msgs: JsMsg[];
  ids: Map<string, Set<string>>;
  newest: string | null;
}

/**
 * The leader turns the source's change events (stored by the receiver) into work: per run, the
 * ids each kind's events named become re-read tasks on the run's closing phase (follow-events.ts
 * of the crm provider), seeded in one transaction fenced on the run still following on that
 * phase, before the events are acknowledged. A leader that dies between the commit and the
 * acknowledgement leaves the events to its successor, who seeds them again: reading rows again
 * writes nothing new. Events are an accelerator, never the only path: the rare reconciling pass
 * reads everything changed since the last one, so an event dropped here (its run stopped or cut
 * over, whose next pass begins after) loses nothing.
 */
export class FollowEvents {
  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly js: JetStreamClient,
    private readonly names: WebhookEventNames,
  ) {}

  /** Takes up to `max` stored events (waiting at most a second for the first). */
  async pass(max = 1_000): Promise<EventsPass> {
    const consumer = await this.js.consumers.get(this.names.stream, this.names.consumer);
    const batch = await consumer.fetch({ max_messages: max, expires: 1_000 });
    const byRun = new Map<string, RunEvents>();
    const report: EventsPass = { taken: 0, seeded: 0, dropped: 0, deferred: 0 };
    for await (const msg of batch) {
      report.taken++;
      const parsed = parseEvent(msg);
      if (!parsed) {
        report.dropped++;
        msg.term();
        continue;
      }
      let run = byRun.get(parsed.runId);
      if (!run) {
        run = { msgs: [], ids: new Map(), newest: null };
        byRun.set(parsed.runId, run);
      }
      run.msgs.push(msg);
      let ids = run.ids.get(parsed.kind);
      if (!ids) {
        ids = new Set();
        run.ids.set(parsed.kind, ids);
      }
      ids.add(parsed.id);
      if (parsed.timestamp && (run.newest === null || parsed.timestamp > run.newest))
        run.newest = parsed.timestamp;
    }
    for (const [runId, events] of byRun) {
      let outcome: Awaited<ReturnType<FollowEvents["seed"]>>;
      try {
        outcome = await this.seed(runId, events);
      } catch (err) {
        // Nothing was seeded (one transaction): the events come back in a second, to this leader or the next.
        this.ctx.logger.warn({ err, run_id: runId }, "seeding a run's webhook events failed; they come back");
        for (const m of events.msgs) m.nak(1_000);
        continue;
      }
      if (outcome === "importing") {
        report.deferred += events.msgs.length;
        for (const m of events.msgs) m.nak(IMPORTING_RETRY_MS);
        continue;
      }
      if (outcome === "gone") report.dropped += events.msgs.length;
      else report.seeded += outcome;
      for (const m of events.msgs) m.ack();
    }
    if (report.seeded > 0) await this.ctx.dispatch();
    return report;
  }

  /** Seeds one run's re-reads; "importing" while its import runs, "gone" when it no longer follows. */
  private async seed(runId: string, events: RunEvents): Promise<number | "importing" | "gone"> {
    const seqs = events.msgs.map((m) => m.seq);
    const batch = `${Math.min(...seqs)}-${Math.max(...seqs)}`;
    return this.ctx.db.transaction(async (tx) => {
      // The same lock closeFollowPass takes: a pass that closes the run's last phase first leaves
      // no closing phase to seed on, and this sees it.
      const [run] = await tx.execute<{
        status: string;
        current_phase: number;
        phases: number;
        follow: RunFollow | null;
      }>(sql`
        select status, current_phase, jsonb_array_length(plan) as phases, follow
          from drover.runs where id = ${runId}::uuid for update`);
      if (!run?.follow || run.status !== "running" || run.follow.cutoverAt !== null) return "gone";
      if (run.current_phase !== run.phases - 1 || run.follow.passes.length === 0) return "importing";
      const seeds = [...events.ids].flatMap(([kind, ids]) => eventSeeds(kind, [...ids], batch));
      const seeded = await insertTaskSeeds(tx, runId, run.current_phase, seeds);
      if (events.newest && (run.follow.feed?.lastEventAt ?? "") < events.newest)
        await tx.execute(sql`
          update drover.runs set follow = jsonb_set(follow, '{feed,lastEventAt}', ${JSON.stringify(events.newest)}::jsonb)
           where id = ${runId}::uuid and follow ? 'feed'`);
      await tx.execute(sql`
        update drover.run_webhooks
           set last_event_at = greatest(coalesce(last_event_at, ${events.newest ?? new Date().toISOString()}::timestamptz),
                                        ${events.newest ?? new Date().toISOString()}::timestamptz),
               updated_at = now()
         where run_id = ${runId}::uuid`);
      return seeded;
    });
  }
}

/** The run, kind and id an event names; undefined for one no run can use. */
function parseEvent(
  msg: JsMsg,
): { runId: string; kind: string; id: string; timestamp: string | null } | undefined {
  const runId = msg.subject.split(".").at(-1) ?? "";
  let body: { meta?: { entity?: unknown; entity_id?: unknown; timestamp?: unknown } };
  try {
    body = msg.json();
  } catch {
    return undefined;
  }
  const entity = body.meta?.entity;
  const entityId = body.meta?.entity_id;
  const kind = typeof entity === "string" ? kindOfWebhookEntity(entity) : undefined;
  if (!kind || (typeof entityId !== "string" && typeof entityId !== "number")) return undefined;
  const ts = body.meta?.timestamp;
  const timestamp =
    typeof ts === "string" && !Number.isNaN(Date.parse(ts)) ? new Date(ts).toISOString() : null;
  return { runId, kind, id: String(entityId), timestamp };
}
