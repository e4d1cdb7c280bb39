import type { TaskContext, TaskSeed } from "@drover/provider-sdk";
import { sourceId } from "./fields.js";
import type { MailCursor } from "./mail-cursor.js";

/**
 * Mail is listed per deal at 20 tokens a list, and most accounts have deals without any: the v2
 * deal lists say how many messages each deal has (`include_fields=email_messages_count`, in the
 * same request and at the same price), so the import lists mail only for deals that have some.
 * Each page of deals keeps which of its deals to list (and their counts) in its task's cursor,
 * where the mail phase finds them (provider.ts seedMail); a catch-up page seeds the mail tasks
 * of its deals itself.
 *
 * What the source does not say is never read as "no mail": a count that is missing, negative or
 * not a number, and a whole account that does not answer the field (or refuses it), fall back to
 * listing the deal's mail as before, with a note saying what was assumed.
 */

/** Asked of the deal lists when the run imports mail. */
export const MAIL_COUNT_FIELD = "email_messages_count";

/** Run fact: the account's deal lists refused include_fields (a 4xx), so no page asks again. */
export const MAIL_COUNTS_REFUSED_FACT = "crm.deals.mail_counts_refused";

/** A deal's message count as its list row states it: a count, or why there is none. */
export function mailCountOf(raw: unknown): number | "missing" | "invalid" {
  if (typeof raw !== "object" || raw === null || !(MAIL_COUNT_FIELD in raw)) return "missing";
  const value = (raw as Record<string, unknown>)[MAIL_COUNT_FIELD];
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : "invalid";
}

/** The deals of a page whose mail is to be listed, each with the count its list should hold (null: unknown). */
export interface MailDeals {
  deals: string[];
  expected: (number | null)[];
}

/**
 * Of one page of deals, those that have messages or whose count is unknown (noted as such):
 * `countsAsked` false when the page could not ask (the account refused the parameter).
 */
export async function mailDealsOf(
  ctx: Pick<TaskContext, "noteOnce">,
  raws: readonly unknown[],
  countsAsked: boolean,
): Promise<MailDeals> {
  const out: MailDeals = { deals: [], expected: [] };
  const unsure: { deal: string; count: "missing" | "invalid"; raw: unknown }[] = [];
  for (const raw of raws) {
    const deal = sourceId(raw);
    // A deal without a usable id cannot be asked for its mail: it fails as a row of its own.
    if (deal === null) continue;
    const count = countsAsked ? mailCountOf(raw) : "missing";
    if (count === 0) continue;
    out.deals.push(deal);
    out.expected.push(typeof count === "number" ? count : null);
    if (typeof count !== "number") unsure.push({ deal, count, raw });
  }
  await noteUnsure(ctx, unsure, raws.length, countsAsked);
  return out;
}

/** Mail tasks of `perTask` deals each; `key` names the set (a page, the mail phase). */
export function mailSeeds(mail: MailDeals, perTask: number, key: string, since?: string): TaskSeed[] {
  const seeds: TaskSeed[] = [];
  for (let i = 0; i < mail.deals.length; i += perTask) {
    const deals = mail.deals.slice(i, i + perTask);
    const cursor: MailCursor = {
      deals,
      index: 0,
      expected: mail.expected.slice(i, i + perTask),
      ...(since ? { since } : {}),
    };
    seeds.push({ kind: "mail", seedKey: `mail:${key}${deals[0]}:${deals.length}`, cursor: { ...cursor } });
  }
  return seeds;
}

/**
 * Says what was assumed: for the account once when none of the page's deals carries the count (or
 * the account refused to give it), else deal by deal.
 */
async function noteUnsure(
  ctx: Pick<TaskContext, "noteOnce">,
  unsure: readonly { deal: string; count: "missing" | "invalid"; raw: unknown }[],
  rows: number,
  countsAsked: boolean,
): Promise<void> {
  if (unsure.length === 0) return;
  if (!countsAsked || (unsure.length === rows && unsure.every((u) => u.count === "missing"))) {
    await ctx.noteOnce({
      level: "info",
      kind: "mail",
      subjectId: null,
      reason: countsAsked
        ? `the account's deal list does not say how many messages a deal has (${MAIL_COUNT_FIELD}): mail is listed for every deal`
        : `the account's deal list refused include_fields=${MAIL_COUNT_FIELD}: mail is listed for every deal`,
    });
    return;
  }
  for (const { deal, count, raw } of unsure) {
    const stated =
      count === "missing"
        ? "is missing"
        : `is ${JSON.stringify((raw as Record<string, unknown>)[MAIL_COUNT_FIELD])?.slice(0, 40)}, not a count`;
    await ctx.noteOnce({
      level: "warn",
      kind: "mail",
      subjectId: deal,
      reason: `the deal's ${MAIL_COUNT_FIELD} ${stated}: assumed it may have mail, and its mail was listed`,
    });
  }
}

/**
 * A deal whose mail list held fewer messages than its count said: every message listed is imported
 * (the list is the only way to them); the note says the count was not met.
 */
export async function noteShortList(
  ctx: Pick<TaskContext, "noteOnce">,
  deal: string,
  listed: number,
  expected: number | null | undefined,
): Promise<void> {
  if (typeof expected !== "number" || listed >= expected) return;
  await ctx.noteOnce({
    level: "warn",
    kind: "mail",
    subjectId: deal,
    reason: `the deal's mail list held ${listed} message(s) where its ${MAIL_COUNT_FIELD} said ${expected}: imported the ${listed} listed`,
  });
}

/**
 * The message count each deal's mail was last listed against in this run (the mail tasks'
 * `expected`, later tasks over earlier ones; null where the list said none); a deal absent was
 * never listed: its count was 0, or it is new. Undefined where the engine cannot say.
 */
export async function listedCounts(
  ctx: Pick<TaskContext, "keptCursors">,
): Promise<Map<string, number | null> | undefined> {
  if (!ctx.keptCursors) return undefined;
  const out = new Map<string, number | null>();
  for (const cursor of await ctx.keptCursors("mail", "expected")) {
    const deals = Array.isArray(cursor.deals) ? cursor.deals : [];
    const expected = Array.isArray(cursor.expected) ? cursor.expected : [];
    for (const [i, deal] of deals.entries())
      out.set(String(deal), typeof expected[i] === "number" ? (expected[i] as number) : null);
  }
  return out;
}

/**
 * Of the deals a catch-up page found with mail, those whose mail may have grown since it was last
 * listed: a count above the one listed against (a deal never listed had 0), or a count unknown now
 * or then. A deal whose count stayed is not listed again: its messages are the ones imported.
 */
export function grownSince(
  mail: MailDeals,
  listed: ReadonlyMap<string, number | null> | undefined,
): MailDeals {
  if (!listed) return mail;
  const out: MailDeals = { deals: [], expected: [] };
  for (const [i, deal] of mail.deals.entries()) {
    const now = mail.expected[i] ?? null;
    const before = listed.has(deal) ? listed.get(deal)! : 0;
    if (now !== null && before !== null && now <= before) continue;
    out.deals.push(deal);
    out.expected.push(now);
  }
  return out;
}
