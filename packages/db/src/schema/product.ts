import { sql } from "drizzle-orm";
import {
  bigint,
  bigserial,
  boolean,
  date,
  index,
  jsonb,
  numeric,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uuid,
} from "drizzle-orm/pg-core";

/**
 * A sample of the destination product's schema: what a CRM-shaped SaaS keeps per tenant.
 * Drover writes into it; it knows nothing of Drover (no source ids here — the ledger maps them).
 */
export const app = pgSchema("app");

const common = {
  id: bigserial("id", { mode: "number" }).primaryKey(),
  tenantId: text("tenant_id").notNull(),
  customFields: jsonb("custom_fields").$type<Record<string, unknown>>(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  /** The record's source deleted it (a follow run applied that); null while it lives. */
  deletedAt: timestamp("deleted_at", { withTimezone: true }),
};

export const companies = app.table(
  "companies",
  {
    ...common,
    name: text("name").notNull(),
    address: text("address"),
  },
  (t) => [
    index("companies_tenant_name").on(t.tenantId, t.name),
    index("companies_tenant_created").on(t.tenantId, t.createdAt),
  ],
);

export const contacts = app.table(
  "contacts",
  {
    ...common,
    companyId: bigint("company_id", { mode: "number" }).references(() => companies.id, {
      onDelete: "set null",
    }),
    name: text("name").notNull(),
    email: text("email"),
    phone: text("phone"),
  },
  (t) => [
    // Matching an incoming person to an existing contact is by email, case-insensitively.
    index("contacts_tenant_email").on(t.tenantId, sql`lower(${t.email})`),
    index("contacts_tenant_company").on(t.tenantId, t.companyId),
    index("contacts_tenant_name").on(t.tenantId, t.name),
  ],
);

export const deals = app.table(
  "deals",
  {
    ...common,
    title: text("title").notNull(),
    value: numeric("value", { precision: 14, scale: 2 }),
    currency: text("currency"),
    /** open, won, lost, or deleted (a deal the source deleted in its last 30 days, kept as such). */
    status: text("status").notNull().default("open"),
    archived: boolean("archived").notNull().default(false),
    contactId: bigint("contact_id", { mode: "number" }).references(() => contacts.id, {
      onDelete: "set null",
    }),
    companyId: bigint("company_id", { mode: "number" }).references(() => companies.id, {
      onDelete: "set null",
    }),
  },
  (t) => [
    index("deals_tenant_status").on(t.tenantId, t.status),
    index("deals_tenant_contact").on(t.tenantId, t.contactId),
    index("deals_tenant_company").on(t.tenantId, t.companyId),
  ],
);

export const leads = app.table(
  "leads",
  {
    ...common,
    title: text("title").notNull(),
    valueAmount: numeric("value_amount", { precision: 14, scale: 2 }),
    valueCurrency: text("value_currency"),
    archived: boolean("archived").notNull().default(false),
    contactId: bigint("contact_id", { mode: "number" }).references(() => contacts.id, {
      onDelete: "set null",
    }),
    companyId: bigint("company_id", { mode: "number" }).references(() => companies.id, {
      onDelete: "set null",
    }),
  },
  (t) => [
    index("leads_tenant_contact").on(t.tenantId, t.contactId),
    index("leads_tenant_company").on(t.tenantId, t.companyId),
  ],
);

const parentLinks = {
  dealId: bigint("deal_id", { mode: "number" }).references(() => deals.id, { onDelete: "set null" }),
  contactId: bigint("contact_id", { mode: "number" }).references(() => contacts.id, { onDelete: "set null" }),
  companyId: bigint("company_id", { mode: "number" }).references(() => companies.id, {
    onDelete: "set null",
  }),
  leadId: bigint("lead_id", { mode: "number" }).references(() => leads.id, { onDelete: "set null" }),
};

export const activities = app.table(
  "activities",
  {
    ...common,
    subject: text("subject").notNull(),
    type: text("type").notNull(),
    dueDate: date("due_date"),
    done: boolean("done").notNull().default(false),
    ...parentLinks,
  },
  (t) => [
    index("activities_tenant_deal").on(t.tenantId, t.dealId),
    index("activities_tenant_contact").on(t.tenantId, t.contactId),
    index("activities_tenant_due").on(t.tenantId, t.dueDate),
  ],
);

export const productNotes = app.table(
  "notes",
  {
    ...common,
    content: text("content").notNull(),
    ...parentLinks,
  },
  (t) => [
    index("notes_tenant_deal").on(t.tenantId, t.dealId),
    index("notes_tenant_contact").on(t.tenantId, t.contactId),
  ],
);

export const emails = app.table(
  "emails",
  {
    ...common,
    dealId: bigint("deal_id", { mode: "number" })
      .notNull()
      .references(() => deals.id, { onDelete: "cascade" }),
    subject: text("subject").notNull(),
    fromAddress: text("from_address"),
    toAddresses: jsonb("to_addresses").$type<string[]>(),
    snippet: text("snippet"),
    body: text("body"),
    sentAt: timestamp("sent_at", { withTimezone: true }),
    /** A message id the product uses to thread replies; unrelated to Drover's ledger. */
    messageKey: uuid("message_key").defaultRandom(),
  },
  (t) => [
    index("emails_tenant_deal").on(t.tenantId, t.dealId),
    index("emails_tenant_sent").on(t.tenantId, t.sentAt),
  ],
);

/**
 * Events copied from a large source table (the pg-table source's room_events: ULID id, room id, JSON
 * data): keyed by the source's ULID so a rewrite is an idempotent upsert, which is what lets that
 * source run without a ledger row per event.
 */
export const roomEvents = app.table(
  "room_events",
  {
    tenantId: text("tenant_id").notNull(),
    id: text("id").notNull(),
    roomId: uuid("room_id").notNull(),
    data: jsonb("data").notNull(),
    copiedAt: timestamp("copied_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.id] }),
    index("room_events_tenant_room").on(t.tenantId, t.roomId),
  ],
);
