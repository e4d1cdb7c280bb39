import type { Dataset, RowKind } from "./dataset.js";
import { TOKEN_OWNER_ID } from "./words.js";

/** What a correct import of this kind must end up with. Ids are strings so int and UUID ids look alike. */
export interface KindTruth {
  count: number;
  ids: string[];
  /** Rows served malformed (still carrying their real id). */
  malformed: string[];
  /** Rows whose every parent reference points at a record that does not exist. */
  orphans: string[];
  /** Rows the mid-run change set edited (their name or title ends in " (edited)"). */
  edited: string[];
  /** Rows the mid-run change set added. */
  added: string[];
  /**
   * Rows the rounds of changes deleted. They stay in `ids` (the import saw them; a GET by id still
   * finds them, marked deleted, except a lead); only a deal stays listed (status deleted).
   */
  deleted: string[];
}

export interface DealsTruth extends KindTruth {
  /** Only in /api/v2/deals/archived. */
  archived: string[];
  /** Deleted in the last 30 days: listed only with status including `deleted`. */
  deleted: string[];
}

export interface LeadsTruth extends KindTruth {
  /** Only in /v1/leads/archived. */
  archived: string[];
}

export interface AttachedTruth extends KindTruth {
  /** Rows pointing at two or more existing parents (deal, person, organization, lead). */
  multiParent: string[];
  /** Rows attached to an existing lead. */
  leadAttached: string[];
}

export interface OrganizationsTruth extends KindTruth {
  /** Custom field key -> human name, as /v1/organizationFields reports it. */
  customFields: Record<string, string>;
}

export interface PersonsTruth extends KindTruth {
  /** Persons shown as `email: [{ value: "", primary: true }]`. */
  withoutEmail: string[];
  /** Persons whose email repeats an earlier person's. */
  duplicateEmails: string[];
}

export interface ActivitiesTruth extends AttachedTruth {
  /** How many activities /v1/activities returns without user_id=0 (those of the token's owner). */
  ownedByTokenUser: number;
}

export interface MailTruth extends KindTruth {
  /** Messages without a body (has_body_flag 0); the others have an html body. */
  bodyless: string[];
  /** Body-less messages served with `body: null` (the rest of them with `body: ""` or no body key). */
  nullBodies: string[];
  /** Body-less messages served with `body: ""`. */
  emptyBodies: string[];
  /** Deals carrying 8..12 messages. */
  heavyDeals: string[];
}

export interface TruthKinds {
  organizations: OrganizationsTruth;
  persons: PersonsTruth;
  deals: DealsTruth;
  leads: LeadsTruth;
  activities: ActivitiesTruth;
  notes: AttachedTruth;
  mail: MailTruth;
}

export type TruthKind = keyof TruthKinds;

export const TRUTH_KINDS: readonly TruthKind[] = [
  "organizations",
  "persons",
  "deals",
  "leads",
  "activities",
  "notes",
  "mail",
];

export interface Truth {
  seed: number;
  kinds: TruthKinds;
}

/** The truth restricted to some kinds (what /__sandbox/truth?kind=a,b serves). */
export interface PartialTruth<K extends TruthKind> {
  seed: number;
  kinds: Pick<TruthKinds, K>;
}

function rowTruth(ds: Dataset, kind: RowKind): KindTruth {
  const count = ds.count(kind);
  const ids: string[] = new Array(count);
  const malformed: string[] = [];
  const orphans: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = kind === "leads" ? ds.leadId(i) : String(i + 1);
    ids[i] = id;
    if (ds.isMalformed(kind, i + 1)) malformed.push(id);
    if ((kind === "activities" || kind === "notes") && ds.isOrphan(kind, i + 1)) orphans.push(id);
  }
  const name = (n: number) => (kind === "leads" ? ds.leadId(n - 1) : String(n));
  return {
    count,
    ids,
    malformed,
    orphans,
    edited: ds.editedIds(kind).map(name),
    added: ds.addedIds(kind).map(name),
    deleted: ds.deletedByChanges(kind).map(name),
  };
}

function attachedTruth(ds: Dataset, kind: "activities" | "notes", base: KindTruth): AttachedTruth {
  const multiParent: string[] = [];
  const leadAttached: string[] = [];
  for (let id = 1; id <= base.count; id++) {
    if (ds.isOrphan(kind, id)) continue;
    const p = ds.parents(kind, id);
    const known = [p.deal_id, p.person_id, p.org_id, p.lead_id].filter((v) => v !== null).length;
    if (known >= 2) multiParent.push(String(id));
    if (p.lead_id !== null) leadAttached.push(String(id));
  }
  return { ...base, multiParent, leadAttached };
}

function mailTruth(ds: Dataset): MailTruth {
  const ids: string[] = [];
  const malformed: string[] = [];
  const bodyless: string[] = [];
  const nullBodies: string[] = [];
  const emptyBodies: string[] = [];
  const heavyDeals: string[] = [];
  for (let dealId = 1; dealId <= ds.count("deals"); dealId++) {
    const n = ds.mail.countFor(dealId);
    if (n >= 8) heavyDeals.push(String(dealId));
    for (let index = 0; index < n; index++) {
      const mailId = ds.mail.idFor(dealId, index);
      const id = String(mailId);
      ids.push(id);
      if (ds.isMalformed("mail", mailId)) malformed.push(id);
      const body = ds.bodyState(mailId);
      if (body !== "html") bodyless.push(id);
      if (body === "null") nullBodies.push(id);
      else if (body === "empty") emptyBodies.push(id);
    }
  }
  return {
    count: ids.length,
    ids,
    malformed,
    orphans: [],
    edited: [],
    added: [],
    deleted: [],
    bodyless,
    nullBodies,
    emptyBodies,
    heavyDeals,
  };
}

export function kindTruth<K extends TruthKind>(ds: Dataset, kind: K): TruthKinds[K] {
  return computeKindTruth(ds, kind) as TruthKinds[K];
}

function computeKindTruth(ds: Dataset, kind: TruthKind): TruthKinds[TruthKind] {
  if (kind === "mail") return mailTruth(ds);
  const base = rowTruth(ds, kind);
  if (kind === "organizations") {
    const customFields = Object.fromEntries(ds.customFields.byKind.organizations.map((f) => [f.key, f.name]));
    return { ...base, customFields };
  }
  if (kind === "activities")
    return { ...attachedTruth(ds, kind, base), ownedByTokenUser: ds.activityIdsOf(TOKEN_OWNER_ID).length };
  if (kind === "notes") return attachedTruth(ds, kind, base);
  if (kind === "deals") {
    const archived: string[] = [];
    const deleted: string[] = [];
    for (let id = 1; id <= base.count; id++) {
      if (ds.isDeletedDeal(id)) deleted.push(String(id));
      else if (ds.isArchived("deals", id)) archived.push(String(id));
    }
    return { ...base, archived, deleted };
  }
  if (kind === "leads") {
    const archived = base.ids.filter((_, i) => ds.isArchived("leads", i + 1));
    return { ...base, archived };
  }
  if (kind === "persons") {
    const withoutEmail: string[] = [];
    const duplicateEmails: string[] = [];
    for (let id = 1; id <= base.count; id++) {
      const email = ds.personEmail(id);
      if (email.value === "") withoutEmail.push(String(id));
      else if (email.duplicateOf !== null) duplicateEmails.push(String(id));
    }
    return { ...base, withoutEmail, duplicateEmails };
  }
  return base as OrganizationsTruth;
}
