import { CustomFields } from "./custom-fields.js";
import { MailIndex } from "./mail-index.js";
import { type MalformableKind, malform, type Row } from "./malform.js";
import { MAX_CHANGE_ROUNDS, MAX_CHANGES, type ResolvedOptions } from "./options.js";
import { hash3, Rng, unit } from "./prng.js";
import { formatDate, formatDateTime } from "./time-format.js";
import {
  ACTIVITY_TYPES,
  CITIES,
  FIRST_NAMES,
  INDUSTRIES,
  LAST_NAMES,
  ORG_NOUNS,
  ORG_SUFFIXES,
  ORG_WORDS,
  PRODUCTS,
  STREETS,
  SUBJECT_TOPICS,
  TOKEN_OWNER_ID,
  USERS,
  type User,
} from "./words.js";

export type { Row } from "./malform.js";

/** The field a change-set edit touches, per kind. */
const LABEL_FIELD: Record<string, string> = {
  organizations: "name",
  persons: "name",
  deals: "title",
  leads: "title",
  activities: "subject",
  notes: "content",
};

export const ROW_KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"] as const;
export type RowKind = (typeof ROW_KINDS)[number];

const ORPHAN_RATE = 0.03;
const NO_EMAIL_RATE = 0.05;
const DUPLICATE_EMAIL_RATE = 0.02;
const NO_PHONE_RATE = 0.1;
/** Messages without a body (has_body_flag 0): a calendar invite, an empty forward. */
const BODYLESS_RATE = 0.07;
/** Deleted ids are drawn this far beyond the generated range. */
const DELETED_SPREAD = 10_000;

const DAY_MS = 86_400_000;
const EPOCH_MS = Date.UTC(2019, 0, 1);
const SPAN_MS = 6 * 365 * DAY_MS;
/** No generated row was updated after this: a later updated_since can only match the change set. */
export const GENERATED_UNTIL_MS = EPOCH_MS + SPAN_MS + 182 * DAY_MS;

export interface Parents {
  deal_id: number | null;
  person_id: number | null;
  org_id: number | null;
  lead_id: string | null;
}

export interface PersonEmail {
  value: string;
  /** Earlier person whose address this one repeats. */
  duplicateOf: number | null;
}

/**
 * How a message's body is served: "html" for a message that has one (has_body_flag 1), sent when
 * include_body asks for it. A message without one (has_body_flag 0) sends no `body` key, `null` or
 * `""`, whatever was asked and whether or not the account's list honours include_body.
 */
export type BodyState = "html" | "absent" | "null" | "empty";

/** v1 writes times as "YYYY-MM-DD HH:MM:SS" in UTC; the leads API, newer, as ISO 8601 with milliseconds. */
const stamp = (kind: RowKind, ms: number): string =>
  kind === "leads" ? new Date(ms).toISOString() : formatDateTime(ms);

const ownerObject = (user: User) => ({
  id: user.id,
  name: user.name,
  email: user.email,
  has_pic: 0,
  pic_hash: null,
  active_flag: true,
  value: user.id,
});

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
  private readonly base: Record<RowKind, number>;
  private readonly counts: Record<RowKind, number>;
  /** When each round of changes was applied, oldest first (the first is the mid-run change set). */
  private readonly rounds: number[] = [];
  /** Rows the rounds delete per kind, `changeDeletes` per round in order; drawn once. */
  private readonly deletable = new Map<RowKind, number[]>();
  /** Per kind, the ids the applied rounds deleted, as a set (rebuilt when a round applies). */
  private goneSets: Map<RowKind, Set<number>> | undefined;
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

  /** When the latest round of changes was applied; null until the first. */
  get changedAtMs(): number | null {
    return this.rounds.at(-1) ?? null;
  }

  /** How many rounds of changes were applied. */
  get changeRounds(): number {
    return this.rounds.length;
  }

  /**
   * The customer keeps working during a run: `changeEdits` rows per kind get a new name or title and
   * a fresh update_time, `changeAdds` rows per kind appear after the last one, and `changeDeletes`
   * rows per kind are deleted: a deal keeps being listed with status=deleted (update_time = the
   * deletion); any other row leaves every list, as Pipedrive's lists leave out what was deleted, and
   * only a GET by id still finds it, marked deleted (a lead, which Pipedrive deletes outright: 404).
   * Applied once, unless `again` asks for another round (a customer still at work while a run
   * follows the account): each round edits the same rows again (" (edited 2)", …), adds rows of its
   * own and deletes other rows, all at its own time. At most MAX_CHANGE_ROUNDS rounds.
   */
  applyChanges(nowMs: number, again = false): boolean {
    if (this.rounds.length > 0 && !again) return false;
    if (this.rounds.length >= MAX_CHANGE_ROUNDS) return false;
    if ((this.rounds.length + 1) * this.opts.changeAdds > MAX_CHANGES) return false;
    // Pipedrive's times are whole seconds apart at best; a round never shares its time with the last.
    this.rounds.push(Math.max(nowMs, (this.rounds.at(-1) ?? 0) + 1));
    for (const kind of ROW_KINDS)
      this.counts[kind] = this.base[kind] + this.opts.changeAdds * this.rounds.length;
    this.leadIndexes = undefined;
    this.goneSets = undefined;
    this.activitiesByUser.clear();
    return true;
  }

  /** The round (0-based) in which this row was added; undefined for a generated row. */
  private addedRound(kind: RowKind, id: number): number | undefined {
    if (id <= this.base[kind] || this.opts.changeAdds === 0) return undefined;
    return Math.floor((id - this.base[kind] - 1) / this.opts.changeAdds);
  }

  /**
   * Rows the rounds delete: from the last generated row down, skipping rows already deleted,
   * archived, edited by the change set or malformed, so each change a round makes is one of a kind.
   */
  private deletableRows(kind: RowKind): number[] {
    let out = this.deletable.get(kind);
    if (!out) {
      out = [];
      const wanted = this.opts.changeDeletes * MAX_CHANGE_ROUNDS;
      for (let id = this.base[kind]; id >= 1 && out.length < wanted; id--) {
        const generatedDeleted =
          kind === "deals" && unit(this.seed, "deals/deleted", id) < this.opts.deletedDealRate;
        const archived = (kind === "deals" || kind === "leads") && this.isArchived(kind, id);
        if (generatedDeleted || archived || this.isEdited(kind, id)) continue;
        if (this.isMalformed(kind, id)) continue;
        out.push(id);
      }
      this.deletable.set(kind, out);
    }
    return out;
  }

  /** The round (0-based) in which this row was deleted; undefined when no round deleted it. */
  private deletedRound(kind: RowKind, id: number): number | undefined {
    if (this.opts.changeDeletes === 0 || this.rounds.length === 0 || id > this.base[kind]) return undefined;
    const at = this.deletableRows(kind).indexOf(id);
    if (at < 0) return undefined;
    const round = Math.floor(at / this.opts.changeDeletes);
    return round < this.rounds.length ? round : undefined;
  }

  /** Rows of `kind` the applied rounds deleted, as 1-based ids (lead positions + 1). */
  deletedByChanges(kind: RowKind = "deals"): number[] {
    if (this.opts.changeDeletes === 0) return [];
    return this.deletableRows(kind).slice(0, this.opts.changeDeletes * this.rounds.length);
  }

  /**
   * A row a round deleted that no list shows any more (every kind but deals, which stay listed
   * with status=deleted): a GET by id still answers it, marked deleted, for 30 days.
   */
  isGone(kind: RowKind, id: number): boolean {
    if (kind === "deals" || this.opts.changeDeletes === 0 || this.rounds.length === 0) return false;
    if (!this.goneSets) this.goneSets = new Map();
    let set = this.goneSets.get(kind);
    if (!set) {
      set = new Set(this.deletedByChanges(kind));
      this.goneSets.set(kind, set);
    }
    return set.has(id);
  }

  /** When a row was last changed by a round of changes; undefined for a row no round touched. */
  private changedMs(kind: RowKind, id: number): number | undefined {
    if (this.rounds.length === 0) return undefined;
    const added = this.addedRound(kind, id);
    if (added !== undefined) return this.rounds[added];
    const deleted = this.deletedRound(kind, id);
    if (deleted !== undefined) return this.rounds[deleted];
    return this.isEdited(kind, id) ? this.rounds.at(-1) : undefined;
  }

  /** 1-based ids (lead positions + 1) the change set edits: spread evenly over the generated rows. */
  editedIds(kind: RowKind): number[] {
    if (this.changedAtMs === null) return [];
    const n = this.base[kind];
    const e = Math.min(this.opts.changeEdits, n);
    return Array.from({ length: e }, (_, i) => 1 + Math.floor((i * n) / e));
  }

  /**
   * What one applied round (0-based) changed in `kind`, as 1-based ids (lead positions + 1): the
   * rows it added, the rows it edited (every round edits the same rows again) and the rows it
   * deleted. The webhooks a round sends are these (webhooks.ts).
   */
  roundChanges(kind: RowKind, round: number): { created: number[]; changed: number[]; deleted: number[] } {
    if (round < 0 || round >= this.rounds.length) return { created: [], changed: [], deleted: [] };
    const adds = this.opts.changeAdds;
    const first = this.base[kind] + round * adds;
    const n = this.base[kind];
    const e = Math.min(this.opts.changeEdits, n);
    return {
      created: Array.from({ length: adds }, (_, i) => first + i + 1),
      changed: Array.from({ length: e }, (_, i) => 1 + Math.floor((i * n) / e)),
      deleted: this.deletedByChanges(kind).slice(
        round * this.opts.changeDeletes,
        (round + 1) * this.opts.changeDeletes,
      ),
    };
  }

  /** The field a round's edit changes in `kind` (" (edited)" appended). */
  labelField(kind: RowKind): string {
    return LABEL_FIELD[kind] as string;
  }

  addedIds(kind: RowKind): number[] {
    const n = this.base[kind];
    return Array.from({ length: this.counts[kind] - n }, (_, i) => n + i + 1);
  }

  private isEdited(kind: RowKind, id: number): boolean {
    if (this.changedAtMs === null || id > this.base[kind]) return false;
    const n = this.base[kind];
    const e = Math.min(this.opts.changeEdits, n);
    if (e === 0) return false;
    // Inverse of editedIds: id = 1 + floor(i n / e) for some i.
    const i = Math.ceil(((id - 1) * e) / n);
    return i < e && 1 + Math.floor((i * n) / e) === id;
  }

  /** Deals deleted in the last 30 days (or by a round of changes): listed only when status includes `deleted`. */
  isDeletedDeal(id: number): boolean {
    if (id > this.base.deals) return false;
    return (
      unit(this.seed, "deals/deleted", id) < this.opts.deletedDealRate ||
      this.deletedRound("deals", id) !== undefined
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
    const changed = this.changedMs(kind, id);
    if (changed !== undefined) {
      // An edit, an addition or a deletion: what a catch-up pass must see, with the time it happened.
      row.update_time = stamp(kind, changed);
      if (id > this.base[kind]) row.add_time = row.update_time;
      const label = LABEL_FIELD[kind] as string;
      // The first round's edit reads " (edited)", a later round's " (edited 2)", " (edited 3)", …
      const round = this.rounds.length === 1 ? "" : ` ${this.rounds.length}`;
      if (this.isEdited(kind, id) && typeof row[label] === "string")
        row[label] = `${row[label]} (edited${round})`;
      // A deleted v1 record says so by its active flag (a v2 one by is_deleted, v2-shape.ts).
      if (this.isGone(kind, id) && "active_flag" in row) row.active_flag = false;
    }
    return this.isMalformed(kind, id) ? malform(kind, row, unit(this.seed, `${kind}/malform-how`, id)) : row;
  }

  /** The row's update time in ms, without building it (for updated_since filters). */
  updateTimeMs(kind: RowKind, id: number): number {
    const changed = this.changedMs(kind, id);
    if (changed !== undefined) return changed;
    const added = this.addTimeMs(kind, id, this.base[kind]);
    return added + Math.floor(unit(this.seed, `${kind}/update-time`, id) * 180 * DAY_MS);
  }

  /** The row's add time in ms, as served: an added row was added when the change set applied. */
  addTimeMsOf(kind: RowKind, id: number): number {
    const added = this.addedRound(kind, id);
    if (added !== undefined) return this.rounds[added] as number;
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
        return this.organization(id);
      case "persons":
        return this.person(id);
      case "deals":
        return this.deal(id);
      case "leads":
        return this.lead(id - 1);
      case "activities":
        return this.activity(id);
      case "notes":
        return this.note(id);
    }
  }

  // ---- shared attributes, each on its own stream so references can be resolved cheaply ----

  private addTimeMs(kind: string, id: number, count: number): number {
    // Roughly increasing with id, like a real account that grew over the years.
    const position = ((id - 1) / Math.max(count, 1)) * SPAN_MS;
    return EPOCH_MS + Math.floor(position + unit(this.seed, `${kind}/add-time`, id) * DAY_MS);
  }

  private times(kind: RowKind, id: number): { add_time: string; update_time: string } {
    const added = this.addTimeMs(kind, id, this.base[kind]);
    const updated = added + Math.floor(unit(this.seed, `${kind}/update-time`, id) * 180 * DAY_MS);
    return { add_time: stamp(kind, added), update_time: stamp(kind, updated) };
  }

  private user(kind: string, id: number): User {
    return USERS[Math.floor(unit(this.seed, `${kind}/user`, id) * USERS.length)] as User;
  }

  orgName(id: number): string {
    const rng = new Rng(this.seed, "organizations/name", id);
    return `${rng.pick(ORG_WORDS)} ${rng.pick(ORG_NOUNS)} ${rng.pick(ORG_SUFFIXES)}`.trim();
  }

  private personNames(id: number): { first: string; last: string } {
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

  private leadRefs(index: number): { personId: number | null; orgId: number | null } {
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

  // ---- rows ----

  private organization(id: number): Row {
    const rng = new Rng(this.seed, "organizations/row", id);
    const number = String(rng.int(1, 250));
    const street = rng.pick(STREETS);
    const city = rng.pick(CITIES);
    const fields = this.customFields.v1Keys("organizations", "organizations", id, false);
    // The industry field keeps its own stream, so accounts generated before the other fields existed look the same.
    fields[this.industryFieldKey] = rng.chance(0.8) ? rng.pick(INDUSTRIES) : null;
    return {
      id,
      name: this.orgName(id),
      address: `${number} ${street}, ${city}`,
      address_subpremise: null,
      address_street_number: number,
      address_route: street,
      address_sublocality: null,
      address_locality: city,
      address_admin_area_level_1: null,
      address_admin_area_level_2: null,
      address_country: null,
      address_postal_code: null,
      address_formatted_address: `${street} ${number}, ${city}`,
      owner_id: ownerObject(this.user("organizations", id)),
      ...this.times("organizations", id),
      ...fields,
    };
  }

  private person(id: number): Row {
    const rng = new Rng(this.seed, "persons/row", id);
    const { first, last } = this.personNames(id);
    const email = this.personEmail(id).value;
    const orgId = this.personOrgId(id);
    const phone = rng.chance(NO_PHONE_RATE)
      ? ""
      : `+${rng.int(1, 49)} ${rng.int(100, 999)} ${String(rng.int(0, 9_999_999)).padStart(7, "0")}`;
    return {
      id,
      name: `${first} ${last}`,
      first_name: first,
      last_name: last,
      // v1 shows "no address" as one empty primary entry, not as an empty list.
      email: email === "" ? [{ value: "", primary: true }] : [{ label: "work", value: email, primary: true }],
      phone: phone === "" ? [{ value: "", primary: true }] : [{ label: "work", value: phone, primary: true }],
      org_id: orgId === null ? null : { value: orgId, name: this.orgName(orgId) },
      owner_id: ownerObject(this.user("persons", id)),
      ...this.times("persons", id),
      ...this.customFields.v1Keys("persons", "persons", id, false),
    };
  }

  private deal(id: number): Row {
    const rng = new Rng(this.seed, "deals/row", id);
    const { personId, orgId } = this.dealRefs(id);
    const r = rng.float();
    return {
      id,
      title: this.dealTitle(id),
      value: Math.round(rng.float() * 5_000_000) / 100,
      currency: rng.chance(0.7) ? "EUR" : "USD",
      status: r < 0.6 ? "open" : r < 0.85 ? "won" : "lost",
      person_id: personId === null ? null : { value: personId, name: this.personName(personId) },
      org_id: orgId === null ? null : { value: orgId, name: this.orgName(orgId) },
      owner_id: ownerObject(this.user("deals", id)),
      ...this.times("deals", id),
      ...this.customFields.v1Keys("deals", "deals", id, false),
    };
  }

  /** A v1 lead: every documented key, and the deals' custom fields that have a value (the others are left out). */
  private lead(index: number): Row {
    const rng = new Rng(this.seed, "leads/row", index);
    const { personId, orgId } = this.leadRefs(index);
    const who =
      orgId !== null ? this.orgName(orgId) : personId !== null ? this.personName(personId) : "Unknown";
    const owner = this.user("leads", index + 1);
    const id = this.leadId(index);
    return {
      id,
      title: `${who} lead`,
      owner_id: owner.id,
      creator_id: owner.id,
      label_ids: [],
      person_id: personId,
      organization_id: orgId,
      source_name: "Manually created",
      origin: "ManuallyCreated",
      origin_id: null,
      channel: null,
      channel_id: null,
      source_deal_id: null,
      is_archived: this.isArchived("leads", index + 1),
      was_seen: rng.chance(0.6),
      value: rng.chance(0.7)
        ? { amount: rng.int(1, 2000) * 50, currency: rng.chance(0.7) ? "EUR" : "USD" }
        : null,
      expected_close_date: null,
      next_activity_id: null,
      ...this.times("leads", index + 1),
      visible_to: "3",
      cc_email: `sandbox+${this.seed}+lead${id.slice(0, 8)}@pipedrivemail.com`,
      ...this.customFields.v1Keys("deals", "leads", index + 1, true),
    };
  }

  private activity(id: number): Row {
    const rng = new Rng(this.seed, "activities/row", id);
    const type = rng.pick(ACTIVITY_TYPES);
    const added = this.addTimeMs("activities", id, this.base.activities);
    const topic = rng.pick(SUBJECT_TOPICS);
    return {
      id,
      subject: `${topic.charAt(0).toUpperCase()}${topic.slice(1)} ${type}`,
      type,
      due_date: formatDate(added + rng.int(0, 30) * DAY_MS),
      done: rng.chance(0.6),
      ...this.parents("activities", id),
      user_id: this.activityUserId(id),
      ...this.times("activities", id),
    };
  }

  /**
   * A v1 note (the documented `BaseNote`): plain parent ids beside display objects naming the
   * parent, null where there is none or it no longer exists.
   */
  private note(id: number): Row {
    const rng = new Rng(this.seed, "notes/row", id);
    const topic = rng.pick(SUBJECT_TOPICS);
    const p = this.parents("notes", id);
    const user = this.user("notes", id);
    const c = this.base;
    const exists = (v: number | null, count: number) => v !== null && v <= count;
    return {
      id,
      active_flag: true,
      ...this.times("notes", id),
      content: `<p>Discussed <b>${topic}</b> with ${rng.pick(FIRST_NAMES)}.</p><ul><li>next step: ${rng.pick(PRODUCTS)}</li></ul>`,
      deal_id: p.deal_id,
      deal: exists(p.deal_id, c.deals) ? { title: this.dealTitle(p.deal_id as number) } : null,
      lead_id: p.lead_id,
      person_id: p.person_id,
      person: exists(p.person_id, c.persons) ? { name: this.personName(p.person_id as number) } : null,
      org_id: p.org_id,
      organization: exists(p.org_id, c.organizations) ? { name: this.orgName(p.org_id as number) } : null,
      project_id: null,
      project: null,
      task_id: null,
      task: null,
      last_update_user_id: null,
      pinned_to_deal_flag: false,
      pinned_to_organization_flag: false,
      pinned_to_person_flag: false,
      pinned_to_project_flag: false,
      pinned_to_task_flag: false,
      user_id: user.id,
      user: { email: user.email, icon_url: null, is_you: user.id === TOKEN_OWNER_ID, name: user.name },
    };
  }

  // ---- mail ----

  bodyState(mailId: number): BodyState {
    if (unit(this.seed, "mail/body-state", mailId) >= BODYLESS_RATE) return "html";
    const served = unit(this.seed, "mail/bodyless-served", mailId);
    return served < 1 / 3 ? "absent" : served < 2 / 3 ? "null" : "empty";
  }

  private mailBody(mailId: number, subject: string): string {
    const rng = new Rng(this.seed, "mail/body", mailId);
    const paragraphs = Array.from(
      { length: rng.int(1, 6) },
      () =>
        `<p>About the ${rng.pick(SUBJECT_TOPICS)}: let us talk about the ${rng.pick(PRODUCTS)} next week.</p>`,
    );
    return `<html><body><h3>${subject}</h3>${paragraphs.join("")}</body></html>`;
  }

  /**
   * One message's `data` object, as served (the documented `MailMessageData`; list items add the
   * `MailMessageItemForList` keys); undefined when the deal has no such message. It carries no
   * `deal_id`: a message belongs to the deal whose list it was found in. `withBody`: the caller asked
   * for the body and this endpoint honours it.
   */
  mailMessage(dealId: number, index: number, withBody: boolean, forList = false): Row | undefined {
    if (index < 0 || index >= this.mail.countFor(dealId)) return undefined;
    const id = this.mail.idFor(dealId, index);
    const rng = new Rng(this.seed, "mail/row", id);
    const { personId } = this.dealRefs(dealId);
    const contactEmail = personId === null ? "" : this.personEmail(personId).value;
    const contact = {
      id: 2 * id,
      email_address: contactEmail || `info@example-${1 + (dealId % 40)}.com`,
      name: personId === null ? "Info" : this.personName(personId),
      linked_person_id: personId,
      linked_person_name: personId === null ? null : this.personName(personId),
      mail_message_party_id: 2 * id,
    };
    const owner = USERS[0];
    const me = {
      id: 2 * id + 1,
      email_address: owner.email,
      name: owner.name,
      linked_person_id: null,
      linked_person_name: null,
      mail_message_party_id: 2 * id + 1,
    };
    const inbound = rng.chance(0.5);
    const sent = this.addTimeMs("deals", dealId, this.base.deals) + (index + 1) * rng.int(1, 72) * 3_600_000;
    const topic = rng.pick(SUBJECT_TOPICS);
    const subject = `${index === 0 ? "" : "Re: "}${this.dealTitle(dealId)} - ${topic}`;
    const state = this.bodyState(id);
    const added = formatDateTime(sent + 60_000);
    const row: Row = {
      id,
      from: [inbound ? contact : me],
      to: [inbound ? me : contact],
      cc: [],
      bcc: [],
      body_url: `https://sandbox.pipedrive.test/api/v1/mailbox/mailMessages/${id}/body`,
      account_id: `acct-${this.seed}`,
      user_id: owner.id,
      mail_thread_id: this.mail.idFor(dealId, 0),
      subject,
      snippet: `About the ${topic}: let us talk about it next week.`,
      mail_tracking_status: inbound ? null : rng.chance(0.5) ? "opened" : "not opened",
      mail_link_tracking_enabled_flag: 0,
      read_flag: 1,
      draft: null,
      draft_flag: 0,
      synced_flag: 1,
      deleted_flag: 0,
      has_body_flag: state === "html" ? 1 : 0,
      sent_flag: inbound ? 0 : 1,
      sent_from_pipedrive_flag: 0,
      smart_bcc_flag: 0,
      message_time: formatDateTime(sent),
      add_time: added,
      update_time: added,
      has_attachments_flag: 0,
      has_inline_attachments_flag: 0,
      has_real_attachments_flag: 0,
    };
    if (forList) {
      row.nylas_id = null;
      row.s3_bucket = null;
      row.s3_bucket_path = null;
      row.external_deleted_flag = false;
      row.mua_message_id = `<${id}.${this.seed}@drover-sandbox.test>`;
      row.template_id = null;
      row.timestamp = row.message_time;
      row.item_type = "mailMessage";
      row.company_id = this.seed;
    }
    if (state === "html") {
      if (withBody) row.body = this.mailBody(id, subject);
    } else if (state !== "absent") {
      row.body = state === "null" ? null : "";
    }
    return this.isMalformed("mail", id) ? malform("mail", row, unit(this.seed, "mail/malform-how", id)) : row;
  }
}
