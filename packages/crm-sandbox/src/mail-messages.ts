import type { MailIndex } from "./mail-index.js";
import { malform, type Row } from "./malform.js";
import { Rng, unit } from "./prng.js";
import type { PersonEmail } from "./rows.js";
import { formatDateTime } from "./time-format.js";
import { PRODUCTS, SUBJECT_TOPICS, USERS } from "./words.js";

/**
 * The deals' mail as Pipedrive serves it: each message's `data` object (MailMessageData, and in a
 * per-deal list MailMessageItemForList), its body, and whether it has one. Pure functions of the
 * seed and the dataset, like the rest of the sandbox.
 */

/** What a message is built from (dataset.ts computes each from the seed). */
export interface MailFacts {
  readonly seed: number;
  readonly mail: MailIndex;
  dealRefs(id: number): { personId: number | null; orgId: number | null };
  dealTitle(id: number): string;
  dealAddedMs(dealId: number): number;
  personEmail(id: number): PersonEmail;
  personName(id: number): string;
  isMalformed(kind: "mail", id: number): boolean;
}

/** Messages without a body (has_body_flag 0): a calendar invite, an empty forward. */
const BODYLESS_RATE = 0.07;

/**
 * How a message's body is served: "html" for a message that has one (has_body_flag 1), sent when
 * include_body asks for it. A message without one (has_body_flag 0) sends no `body` key, `null` or
 * `""`, whatever was asked and whether or not the account's list honours include_body.
 */
export type BodyState = "html" | "absent" | "null" | "empty";

export function bodyStateOf(seed: number, mailId: number): BodyState {
  if (unit(seed, "mail/body-state", mailId) >= BODYLESS_RATE) return "html";
  const served = unit(seed, "mail/bodyless-served", mailId);
  return served < 1 / 3 ? "absent" : served < 2 / 3 ? "null" : "empty";
}

function mailBody(seed: number, mailId: number, subject: string): string {
  const rng = new Rng(seed, "mail/body", mailId);
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
export function mailMessageOf(
  ds: MailFacts,
  dealId: number,
  index: number,
  withBody: boolean,
  forList = false,
): Row | undefined {
  if (index < 0 || index >= ds.mail.countFor(dealId)) return undefined;
  const id = ds.mail.idFor(dealId, index);
  const rng = new Rng(ds.seed, "mail/row", id);
  const { personId } = ds.dealRefs(dealId);
  const contactEmail = personId === null ? "" : ds.personEmail(personId).value;
  const contact = {
    id: 2 * id,
    email_address: contactEmail || `info@example-${1 + (dealId % 40)}.com`,
    name: personId === null ? "Info" : ds.personName(personId),
    linked_person_id: personId,
    linked_person_name: personId === null ? null : ds.personName(personId),
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
  const sent = ds.dealAddedMs(dealId) + (index + 1) * rng.int(1, 72) * 3_600_000;
  const topic = rng.pick(SUBJECT_TOPICS);
  const subject = `${index === 0 ? "" : "Re: "}${ds.dealTitle(dealId)} - ${topic}`;
  const state = bodyStateOf(ds.seed, id);
  const added = formatDateTime(sent + 60_000);
  const row: Row = {
    id,
    from: [inbound ? contact : me],
    to: [inbound ? me : contact],
    cc: [],
    bcc: [],
    body_url: `https://sandbox.pipedrive.test/api/v1/mailbox/mailMessages/${id}/body`,
    account_id: `acct-${ds.seed}`,
    user_id: owner.id,
    mail_thread_id: ds.mail.idFor(dealId, 0),
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
    row.mua_message_id = `<${id}.${ds.seed}@drover-sandbox.test>`;
    row.template_id = null;
    row.timestamp = row.message_time;
    row.item_type = "mailMessage";
    row.company_id = ds.seed;
  }
  if (state === "html") {
    if (withBody) row.body = mailBody(ds.seed, id, subject);
  } else if (state !== "absent") {
    row.body = state === "null" ? null : "";
  }
  return ds.isMalformed("mail", id) ? malform("mail", row, unit(ds.seed, "mail/malform-how", id)) : row;
}
