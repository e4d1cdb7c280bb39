import type { RunFollow } from "@drover/db";
import { insertTaskSeeds } from "@drover/engine";
import type { SourceWebhooks } from "@drover/provider-sdk";
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

/** What one event says changed, as its run's source reads it (SourceWebhooks.eventChange). */
interface EventChange {
  msg: JsMsg;
  kind: string;
  id: string;
  timestamp: string | null;
}

/** What one run's events came to: tasks seeded, or why none were. */
type SeedOutcome =
  | { kind: "seeded"; seeded: number; unusable: JsMsg[] }
  | { kind: "importing" }
  | { kind: "gone" };

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
    const byRun = new Map<string, JsMsg[]>();
    const report: EventsPass = { taken: 0, seeded: 0, dropped: 0, deferred: 0 };
    for await (const msg of batch) {
      report.taken++;
      const runId = msg.subject.split(".").at(-1) ?? "";
      byRun.set(runId, [...(byRun.get(runId) ?? []), msg]);
    }
    for (const [runId, msgs] of byRun) {
      let outcome: SeedOutcome;
      try {
        outcome = await this.seed(runId, msgs);
      } catch (err) {
        // Nothing was seeded (one transaction): the events come back in a second, to this leader or the next.
        this.ctx.logger.warn({ err, run_id: runId }, "seeding a run's webhook events failed; they come back");
        for (const m of msgs) m.nak(1_000);
        continue;
      }
      if (outcome.kind === "importing") {
        report.deferred += msgs.length;
        for (const m of msgs) m.nak(IMPORTING_RETRY_MS);
        continue;
      }
      const unusable = new Set(outcome.kind === "seeded" ? outcome.unusable : msgs);
      report.dropped += unusable.size;
      if (outcome.kind === "seeded") report.seeded += outcome.seeded;
      for (const m of msgs) {
        if (outcome.kind === "seeded" && unusable.has(m)) m.term();
        else m.ack();
      }
    }
    if (report.seeded > 0) await this.ctx.dispatch();
    return report;
  }

  /**
   * Seeds one run's re-reads, its events read by its own source (an event that source cannot use is
   * returned unusable); "importing" while its import runs, "gone" when it no longer follows.
   */
  private async seed(runId: string, msgs: readonly JsMsg[]): Promise<SeedOutcome> {
    const seqs = msgs.map((m) => m.seq);
    const batch = `${Math.min(...seqs)}-${Math.max(...seqs)}`;
    return this.ctx.db.transaction(async (tx) => {
      // The same lock closeFollowPass takes: a pass that closes the run's last phase first leaves
      // no closing phase to seed on, and this sees it.
      const [run] = await tx.execute<{
        source: string;
        status: string;
        current_phase: number;
        phases: number;
        follow: RunFollow | null;
      }>(sql`
        select source, status, current_phase, jsonb_array_length(plan) as phases, follow
          from drover.runs where id = ${runId}::uuid for update`);
      if (!run?.follow || run.status !== "running" || run.follow.cutoverAt !== null) return { kind: "gone" };
      if (run.current_phase !== run.phases - 1 || run.follow.passes.length === 0)
        return { kind: "importing" };
      const webhooks = this.ctx.providers.get(run.source)?.webhooks;
      if (!webhooks) return { kind: "gone" };
      const changes = msgs.map((msg) => changeOf(msg, webhooks));
      const events = changes.filter((c): c is EventChange => c !== undefined);
      const ids = new Map<string, Set<string>>();
      for (const e of events) ids.set(e.kind, new Set([...(ids.get(e.kind) ?? []), e.id]));
      const seeds = [...ids].flatMap(([kind, kindIds]) => webhooks.eventSeeds(kind, [...kindIds], batch));
      const seeded = await insertTaskSeeds(tx, runId, run.current_phase, seeds);
      const newest = events.reduce<string | null>(
        (at, e) => (e.timestamp !== null && (at === null || e.timestamp > at) ? e.timestamp : at),
        null,
      );
      if (newest && (run.follow.feed?.lastEventAt ?? "") < newest)
        await tx.execute(sql`
          update drover.runs set follow = jsonb_set(follow, '{feed,lastEventAt}', ${JSON.stringify(newest)}::jsonb)
           where id = ${runId}::uuid and follow ? 'feed'`);
      await tx.execute(sql`
        update drover.run_webhooks
           set last_event_at = greatest(coalesce(last_event_at, ${newest ?? new Date().toISOString()}::timestamptz),
                                        ${newest ?? new Date().toISOString()}::timestamptz),
               updated_at = now()
         where run_id = ${runId}::uuid`);
      return { kind: "seeded", seeded, unusable: msgs.filter((_, i) => changes[i] === undefined) };
    });
  }
}

/** The row an event names, as the run's source reads its body; undefined for one it cannot use. */
function changeOf(msg: JsMsg, webhooks: SourceWebhooks): EventChange | undefined {
  let body: unknown;
  try {
    body = msg.json();
  } catch {
    return undefined;
  }
  const change = webhooks.eventChange(body);
  return change ? { msg, ...change } : undefined;
}
