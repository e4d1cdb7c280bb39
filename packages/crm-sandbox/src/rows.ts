import type { CustomFields } from "./custom-fields.js";
import type { Row } from "./malform.js";
import { Rng } from "./prng.js";
import { formatDate } from "./time-format.js";
import {
  ACTIVITY_TYPES,
  CITIES,
  FIRST_NAMES,
  INDUSTRIES,
  PRODUCTS,
  STREETS,
  SUBJECT_TOPICS,
  TOKEN_OWNER_ID,
  type User,
} from "./words.js";

/**
 * One row of each kind as Pipedrive serves it, before any change set or malformation: pure
 * functions of the seed and the facts the dataset computes for each id (names, owners, references,
 * times), each on its own random stream so a reference resolves without building its row.
 */

export const ROW_KINDS = ["organizations", "persons", "deals", "leads", "activities", "notes"] as const;
export type RowKind = (typeof ROW_KINDS)[number];

const NO_PHONE_RATE = 0.1;
const DAY_MS = 86_400_000;

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

/** What the row builders read of the dataset (dataset.ts computes each from the seed). */
export interface RowFacts {
  readonly seed: number;
  readonly base: Readonly<Record<RowKind, number>>;
  readonly customFields: CustomFields;
  readonly industryFieldKey: string;
  times(kind: RowKind, id: number): { add_time: string; update_time: string };
  user(kind: string, id: number): User;
  addTimeMs(kind: string, id: number, count: number): number;
  orgName(id: number): string;
  personNames(id: number): { first: string; last: string };
  personName(id: number): string;
  personOrgId(id: number): number | null;
  personEmail(id: number): PersonEmail;
  dealRefs(id: number): { personId: number | null; orgId: number | null };
  dealTitle(id: number): string;
  leadId(index: number): string;
  leadRefs(index: number): { personId: number | null; orgId: number | null };
  isArchived(kind: "deals" | "leads", id: number): boolean;
  activityUserId(id: number): number;
  parents(kind: "activities" | "notes", id: number): Parents;
}

const ownerObject = (user: User) => ({
  id: user.id,
  name: user.name,
  email: user.email,
  has_pic: 0,
  pic_hash: null,
  active_flag: true,
  value: user.id,
});

export function organizationRow(ds: RowFacts, id: number): Row {
  const rng = new Rng(ds.seed, "organizations/row", id);
  const number = String(rng.int(1, 250));
  const street = rng.pick(STREETS);
  const city = rng.pick(CITIES);
  const fields = ds.customFields.v1Keys("organizations", "organizations", id, false);
  // The industry field keeps its own stream, so accounts generated before the other fields existed look the same.
  fields[ds.industryFieldKey] = rng.chance(0.8) ? rng.pick(INDUSTRIES) : null;
  return {
    id,
    name: ds.orgName(id),
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
    owner_id: ownerObject(ds.user("organizations", id)),
    ...ds.times("organizations", id),
    ...fields,
  };
}

export function personRow(ds: RowFacts, id: number): Row {
  const rng = new Rng(ds.seed, "persons/row", id);
  const { first, last } = ds.personNames(id);
  const email = ds.personEmail(id).value;
  const orgId = ds.personOrgId(id);
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
    org_id: orgId === null ? null : { value: orgId, name: ds.orgName(orgId) },
    owner_id: ownerObject(ds.user("persons", id)),
    ...ds.times("persons", id),
    ...ds.customFields.v1Keys("persons", "persons", id, false),
  };
}

export function dealRow(ds: RowFacts, id: number): Row {
  const rng = new Rng(ds.seed, "deals/row", id);
  const { personId, orgId } = ds.dealRefs(id);
  const r = rng.float();
  return {
    id,
    title: ds.dealTitle(id),
    value: Math.round(rng.float() * 5_000_000) / 100,
    currency: rng.chance(0.7) ? "EUR" : "USD",
    status: r < 0.6 ? "open" : r < 0.85 ? "won" : "lost",
    person_id: personId === null ? null : { value: personId, name: ds.personName(personId) },
    org_id: orgId === null ? null : { value: orgId, name: ds.orgName(orgId) },
    owner_id: ownerObject(ds.user("deals", id)),
    ...ds.times("deals", id),
    ...ds.customFields.v1Keys("deals", "deals", id, false),
  };
}

/** A v1 lead: every documented key, and the deals' custom fields that have a value (the others are left out). */
export function leadRow(ds: RowFacts, index: number): Row {
  const rng = new Rng(ds.seed, "leads/row", index);
  const { personId, orgId } = ds.leadRefs(index);
  const who = orgId !== null ? ds.orgName(orgId) : personId !== null ? ds.personName(personId) : "Unknown";
  const owner = ds.user("leads", index + 1);
  const id = ds.leadId(index);
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
    is_archived: ds.isArchived("leads", index + 1),
    was_seen: rng.chance(0.6),
    value: rng.chance(0.7)
      ? { amount: rng.int(1, 2000) * 50, currency: rng.chance(0.7) ? "EUR" : "USD" }
      : null,
    expected_close_date: null,
    next_activity_id: null,
    ...ds.times("leads", index + 1),
    visible_to: "3",
    cc_email: `sandbox+${ds.seed}+lead${id.slice(0, 8)}@pipedrivemail.com`,
    ...ds.customFields.v1Keys("deals", "leads", index + 1, true),
  };
}

export function activityRow(ds: RowFacts, id: number): Row {
  const rng = new Rng(ds.seed, "activities/row", id);
  const type = rng.pick(ACTIVITY_TYPES);
  const added = ds.addTimeMs("activities", id, ds.base.activities);
  const topic = rng.pick(SUBJECT_TOPICS);
  return {
    id,
    subject: `${topic.charAt(0).toUpperCase()}${topic.slice(1)} ${type}`,
    type,
    due_date: formatDate(added + rng.int(0, 30) * DAY_MS),
    done: rng.chance(0.6),
    ...ds.parents("activities", id),
    user_id: ds.activityUserId(id),
    ...ds.times("activities", id),
  };
}

/**
 * A v1 note (the documented `BaseNote`): plain parent ids beside display objects naming the
 * parent, null where there is none or it no longer exists.
 */
export function noteRow(ds: RowFacts, id: number): Row {
  const rng = new Rng(ds.seed, "notes/row", id);
  const topic = rng.pick(SUBJECT_TOPICS);
  const p = ds.parents("notes", id);
  const user = ds.user("notes", id);
  const c = ds.base;
  const exists = (v: number | null, count: number) => v !== null && v <= count;
  return {
    id,
    active_flag: true,
    ...ds.times("notes", id),
    content: `<p>Discussed <b>${topic}</b> with ${rng.pick(FIRST_NAMES)}.</p><ul><li>next step: ${rng.pick(PRODUCTS)}</li></ul>`,
    deal_id: p.deal_id,
    deal: exists(p.deal_id, c.deals) ? { title: ds.dealTitle(p.deal_id as number) } : null,
    lead_id: p.lead_id,
    person_id: p.person_id,
    person: exists(p.person_id, c.persons) ? { name: ds.personName(p.person_id as number) } : null,
    org_id: p.org_id,
    organization: exists(p.org_id, c.organizations) ? { name: ds.orgName(p.org_id as number) } : null,
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
