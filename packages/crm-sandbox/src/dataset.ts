import { ChangeRounds } from "./change-rounds.js";
import { CustomFields } from "./custom-fields.js";
import { MailIndex } from "./mail-index.js";
import { type BodyState, bodyStateOf, mailMessageOf } from "./mail-messages.js";
import { type MalformableKind, malform, type Row } from "./malform.js";
import { MAX_CHANGES, type ResolvedOptions } from "./options.js";
import { hash3, Rng, unit } from "./prng.js";
import {
  activityRow,
  dealRow,
  leadRow,
  noteRow,
  organizationRow,
  type Parents,
  type PersonEmail,
  personRow,
  ROW_KINDS,
  type RowKind,
} from "./rows.js";
import { formatDateTime } from "./time-format.js";
import {
  FIRST_NAMES,
  LAST_NAMES,
  ORG_NOUNS,
  ORG_SUFFIXES,
  ORG_WORDS,
  PRODUCTS,
  USERS,
  type User,
} from "./words.js";

export type { BodyState } from "./mail-messages.js";
export type { Row } from "./malform.js";
export { type Parents, type PersonEmail, ROW_KINDS, type RowKind } from "./rows.js";

/** The field a change-set edit touches, per kind. */
const LABEL_FIELD: Record<string, string> = {
  organizations: "name",
  persons: "name",
  deals: "title",
  leads: "title",
  activities: "subject",
  notes: "content",
};

const ORPHAN_RATE = 0.03;
const NO_EMAIL_RATE = 0.05;
const DUPLICATE_EMAIL_RATE = 0.02;
/** Deleted ids are drawn this far beyond the generated range. */
const DELETED_SPREAD = 10_000;

const DAY_MS = 86_400_000;
const EPOCH_MS = Date.UTC(2019, 0, 1);
const SPAN_MS = 6 * 365 * DAY_MS;
/** No generated row was updated after this: a later updated_since can only match the change set. */
export const GENERATED_UNTIL_MS = EPOCH_MS + SPAN_MS + 182 * DAY_MS;

/** v1 writes times as "YYYY-MM-DD HH:MM:SS" in UTC; the leads API, newer, as ISO 8601 with milliseconds. */
const stamp = (kind: RowKind, ms: number): string =>
  kind === "leads" ? new Date(ms).toISOString() : formatDateTime(ms);

/**
 * The whole CRM as pure functions of (seed, kind, id): nothing but the mail prefix sums is stored,
 * so a million-row dataset costs nothing until a page of it is asked for.
 */
export class Dataset {
  readonly seed: number;
  readonly mail: MailIndex;
  /** Pipedrive names custom fields by a 40-hex key that differs per account. */
  readonly industryFieldKey: string;
  readonly customFields: CustomFields;
  /** What was generated: times and references are computed against these, so a change set never moves them. */
  readonly base: Readonly<Record<RowKind, number>>;
  private readonly counts: Record<RowKind, number>;
  /** The customer's rounds of changes (change-rounds.ts). */
  readonly changes: ChangeRounds;
  private leadIndexes: Map<string, number> | undefined;
  private readonly activitiesByUser = new Map<number, Int32Array>();

  constructor(private readonly opts: ResolvedOptions) {
    this.seed = opts.seed;
    this.base = {
      organizations: opts.organizations,
      persons: opts.persons,
      deals: opts.deals,
      leads: opts.leads,
      activities: opts.activities,
      notes: opts.notes,
    };
    this.counts = { ...this.base };
    this.mail = new MailIndex(opts.seed, opts.deals, opts.mailPerDealMax, opts.heavyMailDealRate);
    this.industryFieldKey = new Rng(opts.seed, "fields/industry", 0).hex(40);
    this.customFields = new CustomFields(opts.seed, this.industryFieldKey);
    this.changes = new ChangeRounds(opts, this.base, (kind, id) => {
      const generatedDeleted =
        kind === "deals" && unit(this.seed, "deals/deleted", id) < opts.deletedDealRate;
      const archived = (kind === "deals" || kind === "leads") && this.isArchived(kind, id);
      return generatedDeleted || archived || this.isMalformed(kind as MalformableKind, id);
    });
  }

  /** When the latest round of changes was applied; null until the first. */
  get changedAtMs(): number | null {
    return this.changes.latestMs;
  }

  /** How many rounds of changes were applied. */
  get changeRounds(): number {
    return this.changes.count;
  }

  /** Applies a round of the customer's changes (change-rounds.ts); false when none may be. */
  applyChanges(nowMs: number, again = false): boolean {
    if (!this.changes.apply(nowMs, again)) return false;
    for (const kind of ROW_KINDS)
      this.counts[kind] = this.base[kind] + this.opts.changeAdds * this.changes.count;
    this.leadIndexes = undefined;
    this.activitiesByUser.clear();
    return true;
  }

  deletedByChanges(kind: RowKind = "deals"): number[] {
    return this.changes.deletedByChanges(kind);
  }

  isGone(kind: RowKind, id: number): boolean {
    return this.changes.isGone(kind, id);
  }

  editedIds(kind: RowKind): number[] {
    return this.changes.editedIds(kind);
  }

  roundChanges(kind: RowKind, round: number): { created: number[]; changed: number[]; deleted: number[] } {
    return this.changes.roundChanges(kind, round);
  }

  addedIds(kind: RowKind): number[] {
    return this.changes.addedIds(kind);
  }

  count(kind: RowKind): number {
    return this.counts[kind];
  }

  /** Whether this account's per-deal mail list honours include_body. */
  get listIncludeBody(): boolean {
    return this.opts.listIncludeBody === 1;
  }

  /** How the v2 deal lists answer include_fields=email_messages_count (options.dealMailCounts). */
  get dealMailCounts(): "answered" | "ignored" | "refused" {
    return this.opts.dealMailCounts === 1
      ? "answered"
      : this.opts.dealMailCounts === 0
        ? "ignored"
        : "refused";
  }

  /** The field a round's edit changes in `kind` (" (edited)" appended). */
  labelField(kind: RowKind): string {
    return LABEL_FIELD[kind] as string;
  }

  /** Deals deleted in the last 30 days (or by a round of changes): listed only when status includes `deleted`. */
  isDeletedDeal(id: number): boolean {
    if (id > this.base.deals) return false;
    return (
      unit(this.seed, "deals/deleted", id) < this.opts.deletedDealRate ||
      this.changes.deletedRound("deals", id) !== undefined
    );
  }

  /** Archived deals (not deleted ones) and leads: only in the archived lists. Leads use position + 1. */
  isArchived(kind: "deals" | "leads", id: number): boolean {
    if (id > this.base[kind]) return false;
    if (kind === "deals" && unit(this.seed, "deals/deleted", id) < this.opts.deletedDealRate) return false;
    return unit(this.seed, `${kind}/archived`, id) < this.opts.archivedRate;
  }

  /** Fixed per (seed, kind, id) so a bad row is bad on every request; leads use position + 1. */
  isMalformed(kind: MalformableKind, id: number): boolean {
    return this.opts.malformedRate > 0 && unit(this.seed, `${kind}/malformed`, id) < this.opts.malformedRate;
  }

  isOrphan(kind: "activities" | "notes", id: number): boolean {
    return unit(this.seed, `${kind}/orphan`, id) < ORPHAN_RATE;
  }

  /** The row at 0-based list position `index`, as served (malformed if it is one of the bad rows). */
  rowAt(kind: RowKind, index: number): Row {
    const id = index + 1;
    const row = this.cleanRow(kind, id);
    const changed = this.changes.changedMs(kind, id);
    if (changed !== undefined) {
      // An edit, an addition or a deletion: what a catch-up pass must see, with the time it happened.
      row.update_time = stamp(kind, changed);
      if (id > this.base[kind]) row.add_time = row.update_time;
      const label = LABEL_FIELD[kind] as string;
      // The first round's edit reads " (edited)", a later round's " (edited 2)", " (edited 3)", …
      const round = this.changes.count === 1 ? "" : ` ${this.changes.count}`;
      if (this.changes.isEdited(kind, id) && typeof row[label] === "string")
        row[label] = `${row[label]} (edited${round})`;
      // A deleted v1 record says so by its active flag (a v2 one by is_deleted, v2-shape.ts).
      if (this.isGone(kind, id) && "active_flag" in row) row.active_flag = false;
    }
    return this.isMalformed(kind, id) ? malform(kind, row, unit(this.seed, `${kind}/malform-how`, id)) : row;
  }

  /** The row's update time in ms, without building it (for updated_since filters). */
  updateTimeMs(kind: RowKind, id: number): number {
    const changed = this.changes.changedMs(kind, id);
    if (changed !== undefined) return changed;
    const added = this.addTimeMs(kind, id, this.base[kind]);
    return added + Math.floor(unit(this.seed, `${kind}/update-time`, id) * 180 * DAY_MS);
  }

  /** The row's add time in ms, as served: an added row was added when the change set applied. */
  addTimeMsOf(kind: RowKind, id: number): number {
    const added = this.changes.addedRound(kind, id);
    if (added !== undefined) return this.changes.roundMs(added);
    return this.addTimeMs(kind, id, this.base[kind]);
  }

  /**
   * Looks a row up by its public id (int or lead UUID); undefined for unknown ids and deleted leads
   * (Pipedrive deletes a lead outright; other kinds are kept, marked deleted, for 30 days).
   */
  findRow(kind: RowKind, rawId: string): Row | undefined {
    if (kind === "leads") {
      const index = this.leadIndex(rawId);
      return index === undefined || this.isGone(kind, index + 1) ? undefined : this.rowAt(kind, index);
    }
    if (!/^[1-9]\d{0,9}$/.test(rawId)) return undefined;
    const id = Number(rawId);
    return id <= this.counts[kind] ? this.rowAt(kind, id - 1) : undefined;
  }

  private cleanRow(kind: RowKind, id: number): Row {
    switch (kind) {
      case "organizations":
        return organizationRow(this, id);
      case "persons":
        return personRow(this, id);
      case "deals":
        return dealRow(this, id);
      case "leads":
        return leadRow(this, id - 1);
      case "activities":
        return activityRow(this, id);
      case "notes":
        return noteRow(this, id);
    }
  }

  // ---- shared attributes, each on its own stream so references can be resolved cheaply ----

  addTimeMs(kind: string, id: number, count: number): number {
    // Roughly increasing with id, like a real account that grew over the years.
    const position = ((id - 1) / Math.max(count, 1)) * SPAN_MS;
    return EPOCH_MS + Math.floor(position + unit(this.seed, `${kind}/add-time`, id) * DAY_MS);
  }

  times(kind: RowKind, id: number): { add_time: string; update_time: string } {
    const added = this.addTimeMs(kind, id, this.base[kind]);
    const updated = added + Math.floor(unit(this.seed, `${kind}/update-time`, id) * 180 * DAY_MS);
    return { add_time: stamp(kind, added), update_time: stamp(kind, updated) };
  }

  user(kind: string, id: number): User {
    return USERS[Math.floor(unit(this.seed, `${kind}/user`, id) * USERS.length)] as User;
  }

  orgName(id: number): string {
    const rng = new Rng(this.seed, "organizations/name", id);
    return `${rng.pick(ORG_WORDS)} ${rng.pick(ORG_NOUNS)} ${rng.pick(ORG_SUFFIXES)}`.trim();
  }

  personNames(id: number): { first: string; last: string } {
    const rng = new Rng(this.seed, "persons/name", id);
    return { first: rng.pick(FIRST_NAMES), last: rng.pick(LAST_NAMES) };
  }

  personName(id: number): string {
    const { first, last } = this.personNames(id);
    return `${first} ${last}`;
  }

  personOrgId(id: number): number | null {
    const orgs = this.base.organizations;
    if (orgs === 0 || unit(this.seed, "persons/has-org", id) >= 0.85) return null;
    return 1 + Math.floor(unit(this.seed, "persons/org", id) * orgs);
  }

  private hasEmail(id: number): boolean {
    return unit(this.seed, "persons/no-email", id) >= NO_EMAIL_RATE;
  }

  private ownEmail(id: number): string {
    const { first, last } = this.personNames(id);
    const domain = 1 + Math.floor(unit(this.seed, "persons/domain", id) * 40);
    return `${first}.${last}.${id}@example-${domain}.com`.toLowerCase();
  }

  /** The address a person shows; "" when the person has none. */
  personEmail(id: number): PersonEmail {
    if (!this.hasEmail(id)) return { value: "", duplicateOf: null };
    if (id < 2 || unit(this.seed, "persons/duplicate", id) >= DUPLICATE_EMAIL_RATE) {
      return { value: this.ownEmail(id), duplicateOf: null };
    }
    // Repeat the address an earlier person actually shows, so the duplicate is visible in the data.
    let other = 1 + Math.floor(unit(this.seed, "persons/duplicate-of", id) * (id - 1));
    while (other > 1 && !this.hasEmail(other)) other--;
    if (!this.hasEmail(other)) return { value: this.ownEmail(id), duplicateOf: null };
    return { value: this.personEmail(other).value, duplicateOf: other };
  }

  dealRefs(id: number): { personId: number | null; orgId: number | null } {
    const rng = new Rng(this.seed, "deals/refs", id);
    const persons = this.base.persons;
    const orgs = this.base.organizations;
    const personId = persons > 0 && rng.chance(0.85) ? rng.int(1, persons) : null;
    let orgId = personId === null ? null : this.personOrgId(personId);
    if (orgId === null && orgs > 0 && rng.chance(0.6)) orgId = rng.int(1, orgs);
    return { personId, orgId };
  }

  dealTitle(id: number): string {
    const { personId, orgId } = this.dealRefs(id);
    const rng = new Rng(this.seed, "deals/title", id);
    const who =
      orgId !== null ? this.orgName(orgId) : personId !== null ? this.personName(personId) : "Walk-in";
    return `${who} ${rng.pick(PRODUCTS)}`;
  }

  /** Lead UUID for a 0-based position; positions past the count are deleted leads. */
  leadId(index: number): string {
    // Four words from separate streams; the first is a bijection of the index, so ids never collide.
    const words = ["a", "b", "c", "d"].map((s) =>
      hash3(this.seed, `leads/id-${s}`, index).toString(16).padStart(8, "0"),
    );
    const hex = words.join("");
    const variant = "89ab"[Number.parseInt(hex[16] as string, 16) % 4] as string;
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  }

  leadIndex(uuid: string): number | undefined {
    if (!this.leadIndexes) {
      this.leadIndexes = new Map();
      for (let i = 0; i < this.counts.leads; i++) this.leadIndexes.set(this.leadId(i), i);
    }
    return this.leadIndexes.get(uuid.toLowerCase());
  }

  leadRefs(index: number): { personId: number | null; orgId: number | null } {
    const rng = new Rng(this.seed, "leads/refs", index);
    const persons = this.base.persons;
    const orgs = this.base.organizations;
    if (persons > 0 && (orgs === 0 || rng.chance(0.7))) {
      const personId = rng.int(1, persons);
      return { personId, orgId: this.personOrgId(personId) };
    }
    return { personId: null, orgId: orgs > 0 ? rng.int(1, orgs) : null };
  }

  activityUserId(id: number): number {
    return this.user("activities", id).id;
  }

  /** Ids of activities owned by one user, built on first use: v1 filters activities by owner. */
  activityIdsOf(userId: number): Int32Array {
    let ids = this.activitiesByUser.get(userId);
    if (!ids) {
      const found: number[] = [];
      for (let id = 1; id <= this.counts.activities; id++)
        if (this.activityUserId(id) === userId) found.push(id);
      ids = Int32Array.from(found);
      this.activitiesByUser.set(userId, ids);
    }
    return ids;
  }

  /** Which records an activity or note hangs off; orphans point only at deleted records. */
  parents(kind: "activities" | "notes", id: number): Parents {
    const rng = new Rng(this.seed, `${kind}/parents`, id);
    const none: Parents = { deal_id: null, person_id: null, org_id: null, lead_id: null };
    const c = this.base;
    if (this.isOrphan(kind, id)) {
      const first = rng.int(0, 3);
      const picks = rng.chance(0.5) ? [first, (first + 1) % 4] : [first];
      // Past any id a change set can add, so an orphan stays one.
      const deleted = (count: number) => count + MAX_CHANGES + rng.int(1, DELETED_SPREAD);
      for (const pick of picks) {
        if (pick === 0) none.deal_id = deleted(c.deals);
        else if (pick === 1) none.person_id = deleted(c.persons);
        else if (pick === 2) none.org_id = deleted(c.organizations);
        else none.lead_id = this.leadId(deleted(c.leads) - 1);
      }
      return none;
    }
    const r = rng.float();
    const wanted = r < 0.5 ? "deal" : r < 0.75 ? "person" : r < 0.9 ? "lead" : "org";
    const available = (k: string) =>
      (k === "deal" && c.deals > 0) ||
      (k === "person" && c.persons > 0) ||
      (k === "lead" && c.leads > 0) ||
      (k === "org" && c.organizations > 0);
    const target = available(wanted) ? wanted : ["deal", "person", "lead", "org"].find(available);
    if (target === "deal") {
      const dealId = rng.int(1, c.deals);
      const refs = this.dealRefs(dealId);
      return { deal_id: dealId, person_id: refs.personId, org_id: refs.orgId, lead_id: null };
    }
    if (target === "person") {
      const personId = rng.int(1, c.persons);
      return { deal_id: null, person_id: personId, org_id: this.personOrgId(personId), lead_id: null };
    }
    if (target === "lead") {
      const index = rng.int(0, c.leads - 1);
      const refs = this.leadRefs(index);
      return { deal_id: null, person_id: refs.personId, org_id: refs.orgId, lead_id: this.leadId(index) };
    }
    if (target === "org") return { ...none, org_id: rng.int(1, c.organizations) };
    return none;
  }

  // ---- mail ----

  bodyState(mailId: number): BodyState {
    return bodyStateOf(this.seed, mailId);
  }

  /** One message as served (mail-messages.ts); undefined when the deal has no such message. */
  mailMessage(dealId: number, index: number, withBody: boolean, forList = false): Row | undefined {
    return mailMessageOf(this, dealId, index, withBody, forList);
  }

  /** When deal `dealId` was added, in ms: its messages are sent after it. */
  dealAddedMs(dealId: number): number {
    return this.addTimeMs("deals", dealId, this.base.deals);
  }
}
