import { MAX_LIMIT } from "./api-routes.js";
import { type Dataset, ROW_KINDS, type RowKind } from "./dataset.js";
import { ENDPOINT_COSTS } from "./token-costs.js";

/**
 * The fewest tokens Pipedrive's API allows for importing this account whole and then catching up
 * on what its rounds of changes did: the yardstick of `token_efficiency` (test/bench). An import
 * must read each list once at its largest page (500 rows), one mail list per deal that has mail
 * (`email_messages_count` says which), and each message's body by id only where the account's
 * lists do not carry it (`--list-include-body 0`) and the message has one (has_body_flag 1). A
 * catch-up reads each list once with `updated_since` (one page when little changed), the leads'
 * archived list whole (it takes no `updated_since`), and the mail of deals added with mail.
 *
 * List sizes are taken as they stand now (after the changes applied so far): the rows a round
 * adds are in the import's lists when they come before it reads them. What a follow run's later
 * passes and sweeps read is not counted.
 */
export interface TokenMinimum {
  /** import.tokens + catchUp.tokens. */
  tokens: number;
  import: MinimumPart & { mailBodies: number };
  catchUp: MinimumPart;
  /** Deals whose mail list holds messages (archived and deleted deals included). */
  dealsWithMail: number;
  /** Where bodies come from on this account. */
  bodies: "list" | "fetch";
}

export interface MinimumPart {
  tokens: number;
  /** Pages of each list, by endpoint as ENDPOINT_COSTS names it. */
  lists: Record<string, { pages: number; tokens: number }>;
  mailLists: number;
}

const pagesOf = (rows: number) => Math.max(1, Math.ceil(rows / MAX_LIMIT));

function part(lists: Record<string, number>, mailLists: number): MinimumPart {
  const out: MinimumPart = { tokens: 0, lists: {}, mailLists };
  for (const [endpoint, rows] of Object.entries(lists)) {
    const pages = pagesOf(rows);
    const tokens = pages * ENDPOINT_COSTS[endpoint]!;
    out.lists[endpoint] = { pages, tokens };
    out.tokens += tokens;
  }
  out.tokens += mailLists * ENDPOINT_COSTS["/v1/deals/{id}/mailMessages"]!;
  return out;
}

export function tokenMinimum(ds: Dataset): TokenMinimum {
  const listed = (kind: RowKind, keep: (id: number) => boolean) => {
    let n = 0;
    for (let id = 1; id <= ds.count(kind); id++) if (!ds.isGone(kind, id) && keep(id)) n++;
    return n;
  };
  const all = () => true;
  const archivedDeals = listed("deals", (id) => ds.isArchived("deals", id));
  const archivedLeads = listed("leads", (id) => ds.isArchived("leads", id));
  const importLists = {
    "/api/v2/organizations": listed("organizations", all),
    "/api/v2/persons": listed("persons", all),
    "/api/v2/deals": ds.count("deals") - archivedDeals,
    "/api/v2/deals/archived": archivedDeals,
    "/v1/leads": listed("leads", all) - archivedLeads,
    "/v1/leads/archived": archivedLeads,
    "/api/v2/activities": listed("activities", all),
    "/v1/notes": listed("notes", all),
  };
  let dealsWithMail = 0;
  let bodies = 0;
  for (let deal = 1; deal <= ds.count("deals"); deal++) {
    const count = ds.mail.countFor(deal);
    if (count === 0) continue;
    dealsWithMail++;
    for (let index = 0; index < count; index++)
      if (ds.bodyState(ds.mail.idFor(deal, index)) === "html") bodies++;
  }
  const fetched = ds.listIncludeBody ? 0 : bodies;
  const imported = part(importLists, dealsWithMail);
  const mailBodies = fetched * ENDPOINT_COSTS["/v1/mailbox/mailMessages/{id}"]!;

  // Rows the rounds changed, per kind: each list's updated_since pass holds at most these.
  const changed = Object.fromEntries(
    ROW_KINDS.map((kind) => [
      kind,
      new Set([...ds.editedIds(kind), ...ds.addedIds(kind), ...ds.deletedByChanges(kind)]).size,
    ]),
  ) as Record<RowKind, number>;
  const catchUpLists = {
    "/api/v2/organizations": changed.organizations,
    "/api/v2/persons": changed.persons,
    "/api/v2/deals": changed.deals,
    "/api/v2/deals/archived": 0,
    "/v1/leads": changed.leads,
    "/v1/leads/archived": archivedLeads,
    "/api/v2/activities": changed.activities,
    "/v1/notes": changed.notes,
  };
  const addedWithMail = ds.addedIds("deals").filter((id) => ds.mail.countFor(id) > 0).length;
  const catchUp = part(catchUpLists, addedWithMail);
  return {
    tokens: imported.tokens + mailBodies + catchUp.tokens,
    import: { ...imported, tokens: imported.tokens + mailBodies, mailBodies: fetched },
    catchUp,
    dealsWithMail,
    bodies: ds.listIncludeBody ? "list" : "fetch",
  };
}
