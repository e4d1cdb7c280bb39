import { type Activity, independentBatch, type Person, productWriters } from "@drover/product-records";
import type { BatchWriter, HeldSlot, ParentMap, RowResult, WritableRow } from "@drover/provider-sdk";
import type { ObjectType } from "./object-types.js";
import { type EmailRow, HUBSPOT_PARENTS, type ProductRow } from "./product-rows.js";

/**
 * The product writers (@drover/product-records) with HubSpot's kind names for the parents, one
 * per type: companies, deals, notes and the activity engagements plan each row alone; contacts are
 * matched by email as Pipedrive's persons are; an email goes to app.emails when its deal is known,
 * else to app.activities as an activity of type email (an app.emails row requires a deal).
 */
const writers = productWriters(HUBSPOT_PARENTS, { sameDealPhase: ["contacts", "companies"] });

/** The parents a row of `type` names, by HubSpot's kind names: one ledger query per page. */
export function refsOf(type: ObjectType, row: ProductRow): Record<string, string | null> {
  switch (type) {
    case "companies":
      return {};
    case "contacts":
      return writers.refs("contact", row);
    case "deals":
      return writers.refs("deal", row);
    case "notes":
      return writers.refs("note", row);
    case "emails":
      return writers.refs("activity", (row as EmailRow).activity);
    default:
      return writers.refs("activity", row);
  }
}

export function batchFor(type: ObjectType, tenantId: string, parents: ParentMap): BatchWriter<ProductRow> {
  const writer = (() => {
    switch (type) {
      case "companies":
        return independentBatch(writers.companyKind, tenantId, parents);
      case "contacts":
        return writers.personBatch(tenantId, parents) as BatchWriter<Person>;
      case "deals":
        return independentBatch(writers.dealKind, tenantId, parents);
      case "notes":
        return independentBatch(writers.noteKind, tenantId, parents);
      case "emails":
        return emailBatch(tenantId, parents);
      default:
        return independentBatch(writers.activityKind, tenantId, parents);
    }
  })();
  return writer as unknown as BatchWriter<ProductRow>;
}

/**
 * Emails, each to the table its deal decides: app.emails when the ledger knows its deal, else an
 * activity of type email (linked to its contact and company, skipped when it knows none). A row
 * applied again (catch-up) stays in the table its record is in, whatever its deal says now.
 */
function emailBatch(tenantId: string, parents: ParentMap): BatchWriter<EmailRow> {
  const asEmail = independentBatch(writers.emailKind, tenantId, parents);
  const asActivity = independentBatch(writers.activityKind, tenantId, parents);
  const isEmail = (row: EmailRow, held?: HeldSlot) =>
    held?.recordType
      ? held.recordType === "email"
      : parents.has(HUBSPOT_PARENTS.deal, row.email.deal || null);
  return {
    writeRow: (tx, row, sourceId, held) =>
      isEmail(row, held)
        ? asEmail.writeRow(tx, row.email, sourceId, held)
        : asActivity.writeRow(tx, row.activity, sourceId, held),
    async writeBatch(tx, rows) {
      const results: RowResult[] = new Array(rows.length);
      const emails: { at: number; row: WritableRow<EmailRow["email"]> }[] = [];
      const activities: { at: number; row: WritableRow<Activity> }[] = [];
      for (const [at, row] of rows.entries()) {
        const slot = row.held ? { held: row.held } : {};
        if (isEmail(row.data, row.held))
          emails.push({ at, row: { sourceId: row.sourceId, data: row.data.email, ...slot } });
        else activities.push({ at, row: { sourceId: row.sourceId, data: row.data.activity, ...slot } });
      }
      if (emails.length > 0) {
        const written = await asEmail.writeBatch(
          tx,
          emails.map((e) => e.row),
        );
        for (const [k, e] of emails.entries()) results[e.at] = written[k]!;
      }
      if (activities.length > 0) {
        const written = await asActivity.writeBatch(
          tx,
          activities.map((a) => a.row),
        );
        for (const [k, a] of activities.entries()) results[a.at] = written[k]!;
      }
      return results;
    },
  };
}
