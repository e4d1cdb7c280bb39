import type { CallsLeft, EstimateContext, TaskTally, WorkEstimate } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { runSettings } from "./config.js";
import { CATCH_UP, KIND_LISTS } from "./lists.js";
import { BODY_SOURCE_FACT, type MailCursor } from "./mail.js";
import { ENDPOINT_COSTS, tokenCost } from "./token-costs.js";

const MAIL_LIST = ENDPOINT_COSTS["/v1/deals/{id}/mailMessages"]!;
const MAIL_BODY = ENDPOINT_COSTS["/v1/mailbox/mailMessages/{id}"]!;
/** Messages whose bodies the share with a body is measured on: exact to this many, a sample beyond. */
const BODY_SAMPLE = 10_000;

/** A page of the kind's list number `list` (a v2 list 10 tokens, a v1 list 20, archived lists more). */
function pageCost(kind: string, list: unknown): number {
  const at = KIND_LISTS[kind]?.[typeof list === "number" ? list : 0];
  return at ? tokenCost("list", at.path) : tokenCost("list", "");
}

/**
 * What a live crm run still needs from Pipedrive, from what it has learned:
 * - a list kind: a list call per page task still to run (pending or running). Pipedrive does not
 *   say how long a list is, so while a chain or stripe goes on this is a floor; a kind whose phase
 *   has not begun needs at least one page per list;
 * - mail: per deal still to walk, one list call and, where bodies are fetched one by one (the run's
 *   fact), one get per message that has a body, at the messages per deal (and the share of them
 *   with a body) the run has met so far. Before the mail
 *   phase the deals are those the pages of deals found with mail (or, where none kept them, every
 *   deal the ledger holds);
 * each call at its endpoint's token cost (token-costs.ts).
 */
export async function estimateCrmWork(ctx: EstimateContext): Promise<WorkEstimate> {
  const { run, tasks } = ctx;
  const { settings } = runSettings(run);
  const bodies = await ctx.runFact(BODY_SOURCE_FACT);
  const kinds: CallsLeft[] = [];
  const seeded = new Set(tasks.map((t) => t.kind));
  for (const kind of run.plan.flat()) {
    if (kind === CATCH_UP) continue;
    if (kind === "mail") {
      kinds.push(await mailLeft(ctx, typeof bodies === "string" ? bodies : null, seeded.has("mail")));
      continue;
    }
    const open = tasks.filter((t) => t.kind === kind && t.status !== "succeeded");
    const lists = KIND_LISTS[kind] ?? [];
    const pages = seeded.has(kind) ? open.reduce((n, t) => n + t.n, 0) : Math.max(1, lists.length);
    const tokens = seeded.has(kind)
      ? open.reduce((n, t) => n + t.n * pageCost(kind, t.cursor.list), 0)
      : lists.reduce((n, _, i) => n + pageCost(kind, i), 0);
    kinds.push({
      kind,
      requests: pages,
      tokens,
      atLeast: !seeded.has(kind) || pages > 0,
    });
  }
  return { kinds, ...(settings.dailyTokens > 0 ? { dailyTokens: settings.dailyTokens } : {}) };
}

async function mailLeft(ctx: EstimateContext, bodies: string | null, seeded: boolean): Promise<CallsLeft> {
  const tasks: readonly TaskTally[] = ctx.tasks;
  let dealsLeft = 0;
  let dealsWalked = 0;
  for (const t of tasks) {
    if (t.kind !== "mail") continue;
    const c = t.cursor as unknown as MailCursor;
    const deals = Array.isArray(c.deals) ? c.deals.length : 0;
    const done = t.status === "succeeded" ? deals : Math.min(deals, Number(c.index) || 0);
    dealsWalked += done * t.n;
    dealsLeft += (deals - done) * t.n;
  }
  // Before the mail phase: the deals the pages of deals found with mail (mail-counts.ts), else
  // every deal the ledger holds.
  const counted = tasks.filter(
    (t) => t.kind === "deals" && typeof t.cursor.mail === "object" && t.cursor.mail,
  );
  if (!seeded && counted.length > 0)
    dealsLeft = counted.reduce(
      (n, t) => n + ((t.cursor.mail as { deals?: unknown[] }).deals?.length ?? 0),
      0,
    );
  else if (!seeded) dealsLeft = await ctx.ledger.heldCount("deals");
  // Messages met per deal walked, and of those the share with a body (one without says so in its
  // list and costs no get: has_body_flag 0), from up to BODY_SAMPLE messages the run created;
  // before any deal is walked, a deal is counted as one message with a body.
  const mail = await ctx.ledger.runRows("mail", BODY_SAMPLE);
  const sampled = mail.createdRecordIds;
  const [withBodies] =
    sampled.length === 0
      ? []
      : await ctx.db.execute<{ n: number }>(sql`
          select count(body)::int as n from app.emails where id = any(${sql.param(sampled)}::bigint[])`);
  const perDeal = dealsWalked > 0 ? mail.rows / dealsWalked : 1;
  const withBody = sampled.length > 0 ? (withBodies?.n ?? 0) / sampled.length : 1;
  const gets = bodies === "list" ? 0 : Math.round(dealsLeft * perDeal * withBody);
  return {
    kind: "mail",
    requests: dealsLeft + gets,
    tokens: dealsLeft * MAIL_LIST + gets * MAIL_BODY,
    // Until the deals phase is over, or the body source is known, more may come.
    atLeast: !seeded || bodies === null,
  };
}
