import type { ProductRecords } from "@drover/provider-sdk";

/**
 * The writers' record types, their product tables, and every product column linking them: what a
 * revert (RevertRun) undoes. One map for every source that writes through these writers, so a
 * HubSpot run is reverted exactly as a Pipedrive one.
 */
export const PRODUCT_RECORDS: ProductRecords = {
  tables: {
    company: "app.companies",
    contact: "app.contacts",
    deal: "app.deals",
    lead: "app.leads",
    activity: "app.activities",
    note: "app.notes",
    email: "app.emails",
  },
  links: [
    { recordType: "contact", column: "company_id", parent: "company" },
    ...(["deal", "lead"] as const).flatMap((recordType) => [
      { recordType, column: "contact_id", parent: "contact" },
      { recordType, column: "company_id", parent: "company" },
    ]),
    ...(["activity", "note"] as const).flatMap((recordType) => [
      { recordType, column: "deal_id", parent: "deal" },
      { recordType, column: "contact_id", parent: "contact" },
      { recordType, column: "company_id", parent: "company" },
      { recordType, column: "lead_id", parent: "lead" },
    ]),
    { recordType: "email", column: "deal_id", parent: "deal", required: true },
  ],
};
