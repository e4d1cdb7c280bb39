CREATE SCHEMA "drover";
--> statement-breakpoint
CREATE SCHEMA "app";
--> statement-breakpoint
CREATE TABLE "drover"."budgets" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"source" text NOT NULL,
	"source_account" text NOT NULL,
	"burst_capacity" integer DEFAULT 20 NOT NULL,
	"burst_used" integer DEFAULT 0 NOT NULL,
	"burst_reset_at" timestamp with time zone,
	"daily_remaining" bigint,
	"daily_reset_at" timestamp with time zone,
	"exhausted_at" timestamp with time zone,
	"spent" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "drover"."ledger" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"source" text NOT NULL,
	"source_account" text NOT NULL,
	"kind" text NOT NULL,
	"source_id" text NOT NULL,
	"action" text NOT NULL,
	"record_type" text,
	"record_id" bigint,
	"reason" text,
	"pending_refs" jsonb,
	"run_id" uuid NOT NULL,
	"task_id" bigint,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ledger_action_check" CHECK ("drover"."ledger"."action" in ('created','matched','skipped'))
);
--> statement-breakpoint
CREATE TABLE "drover"."notes" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" uuid NOT NULL,
	"task_id" bigint,
	"level" text NOT NULL,
	"kind" text NOT NULL,
	"subject_id" text,
	"reason" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "drover"."runs" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"tenant_id" text NOT NULL,
	"source" text NOT NULL,
	"source_account" text NOT NULL,
	"kinds" text[] NOT NULL,
	"plan" jsonb NOT NULL,
	"current_phase" integer DEFAULT 0 NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"source_config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"source_secret" text,
	"trace_context" jsonb,
	"error" text,
	"verification" jsonb,
	"heartbeat_at" timestamp with time zone,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "runs_status_check" CHECK ("drover"."runs"."status" in ('pending','running','stopping','stopped','succeeded','failed'))
);
--> statement-breakpoint
CREATE TABLE "drover"."tasks" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"phase" integer NOT NULL,
	"seed_key" text NOT NULL,
	"cursor" jsonb NOT NULL,
	"processed_offset" integer DEFAULT 0 NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"locked_by" text,
	"locked_at" timestamp with time zone,
	"available_at" timestamp with time zone DEFAULT now() NOT NULL,
	"dispatched_at" timestamp with time zone,
	"stats" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"last_error" text,
	"started_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tasks_status_check" CHECK ("drover"."tasks"."status" in ('pending','running','succeeded','failed','cancelled'))
);
--> statement-breakpoint
CREATE TABLE "app"."activities" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"custom_fields" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"subject" text NOT NULL,
	"type" text NOT NULL,
	"due_date" date,
	"done" boolean DEFAULT false NOT NULL,
	"deal_id" bigint,
	"contact_id" bigint,
	"company_id" bigint,
	"lead_id" bigint
);
--> statement-breakpoint
CREATE TABLE "app"."companies" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"custom_fields" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"name" text NOT NULL,
	"address" text
);
--> statement-breakpoint
CREATE TABLE "app"."contacts" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"custom_fields" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"company_id" bigint,
	"name" text NOT NULL,
	"email" text,
	"phone" text
);
--> statement-breakpoint
CREATE TABLE "app"."deals" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"custom_fields" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"title" text NOT NULL,
	"value" numeric(14, 2),
	"currency" text,
	"status" text DEFAULT 'open' NOT NULL,
	"contact_id" bigint,
	"company_id" bigint
);
--> statement-breakpoint
CREATE TABLE "app"."emails" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"custom_fields" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"deal_id" bigint NOT NULL,
	"subject" text NOT NULL,
	"from_address" text,
	"to_addresses" jsonb,
	"snippet" text,
	"body" text,
	"sent_at" timestamp with time zone,
	"message_key" uuid DEFAULT gen_random_uuid()
);
--> statement-breakpoint
CREATE TABLE "app"."leads" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"custom_fields" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"title" text NOT NULL,
	"value_amount" numeric(14, 2),
	"value_currency" text,
	"contact_id" bigint,
	"company_id" bigint
);
--> statement-breakpoint
CREATE TABLE "app"."notes" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"custom_fields" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"content" text NOT NULL,
	"deal_id" bigint,
	"contact_id" bigint,
	"company_id" bigint,
	"lead_id" bigint
);
--> statement-breakpoint
ALTER TABLE "drover"."notes" ADD CONSTRAINT "notes_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "drover"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "drover"."tasks" ADD CONSTRAINT "tasks_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "drover"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."activities" ADD CONSTRAINT "activities_deal_id_deals_id_fk" FOREIGN KEY ("deal_id") REFERENCES "app"."deals"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."activities" ADD CONSTRAINT "activities_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "app"."contacts"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."activities" ADD CONSTRAINT "activities_company_id_companies_id_fk" FOREIGN KEY ("company_id") REFERENCES "app"."companies"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."activities" ADD CONSTRAINT "activities_lead_id_leads_id_fk" FOREIGN KEY ("lead_id") REFERENCES "app"."leads"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."contacts" ADD CONSTRAINT "contacts_company_id_companies_id_fk" FOREIGN KEY ("company_id") REFERENCES "app"."companies"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."deals" ADD CONSTRAINT "deals_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "app"."contacts"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."deals" ADD CONSTRAINT "deals_company_id_companies_id_fk" FOREIGN KEY ("company_id") REFERENCES "app"."companies"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."emails" ADD CONSTRAINT "emails_deal_id_deals_id_fk" FOREIGN KEY ("deal_id") REFERENCES "app"."deals"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."leads" ADD CONSTRAINT "leads_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "app"."contacts"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."leads" ADD CONSTRAINT "leads_company_id_companies_id_fk" FOREIGN KEY ("company_id") REFERENCES "app"."companies"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."notes" ADD CONSTRAINT "notes_deal_id_deals_id_fk" FOREIGN KEY ("deal_id") REFERENCES "app"."deals"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."notes" ADD CONSTRAINT "notes_contact_id_contacts_id_fk" FOREIGN KEY ("contact_id") REFERENCES "app"."contacts"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."notes" ADD CONSTRAINT "notes_company_id_companies_id_fk" FOREIGN KEY ("company_id") REFERENCES "app"."companies"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "app"."notes" ADD CONSTRAINT "notes_lead_id_leads_id_fk" FOREIGN KEY ("lead_id") REFERENCES "app"."leads"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "budgets_account" ON "drover"."budgets" USING btree ("source","source_account");--> statement-breakpoint
CREATE UNIQUE INDEX "ledger_source_row" ON "drover"."ledger" USING btree ("tenant_id","source","source_account","kind","source_id");--> statement-breakpoint
CREATE INDEX "ledger_run_kind_action" ON "drover"."ledger" USING btree ("run_id","kind","action");--> statement-breakpoint
CREATE INDEX "ledger_pending_refs" ON "drover"."ledger" USING btree ("run_id","kind") WHERE pending_refs is not null;--> statement-breakpoint
CREATE INDEX "notes_run_grouping" ON "drover"."notes" USING btree ("run_id","level","kind","reason");--> statement-breakpoint
CREATE INDEX "notes_subject" ON "drover"."notes" USING btree ("kind","subject_id");--> statement-breakpoint
CREATE UNIQUE INDEX "runs_one_live_per_source" ON "drover"."runs" USING btree ("tenant_id","source","source_account") WHERE status in ('pending','running','stopping');--> statement-breakpoint
CREATE INDEX "runs_tenant_created" ON "drover"."runs" USING btree ("tenant_id","created_at");--> statement-breakpoint
CREATE INDEX "runs_status" ON "drover"."runs" USING btree ("status");--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_run_seed_key" ON "drover"."tasks" USING btree ("run_id","seed_key");--> statement-breakpoint
CREATE INDEX "tasks_run_phase_status" ON "drover"."tasks" USING btree ("run_id","phase","status");--> statement-breakpoint
CREATE INDEX "tasks_dispatch" ON "drover"."tasks" USING btree ("run_id","status","available_at");--> statement-breakpoint
CREATE INDEX "tasks_running_locked" ON "drover"."tasks" USING btree ("locked_at") WHERE status = 'running';--> statement-breakpoint
CREATE INDEX "activities_tenant_deal" ON "app"."activities" USING btree ("tenant_id","deal_id");--> statement-breakpoint
CREATE INDEX "activities_tenant_contact" ON "app"."activities" USING btree ("tenant_id","contact_id");--> statement-breakpoint
CREATE INDEX "activities_tenant_due" ON "app"."activities" USING btree ("tenant_id","due_date");--> statement-breakpoint
CREATE INDEX "companies_tenant_name" ON "app"."companies" USING btree ("tenant_id","name");--> statement-breakpoint
CREATE INDEX "companies_tenant_created" ON "app"."companies" USING btree ("tenant_id","created_at");--> statement-breakpoint
CREATE INDEX "contacts_tenant_email" ON "app"."contacts" USING btree ("tenant_id",lower("email"));--> statement-breakpoint
CREATE INDEX "contacts_tenant_company" ON "app"."contacts" USING btree ("tenant_id","company_id");--> statement-breakpoint
CREATE INDEX "contacts_tenant_name" ON "app"."contacts" USING btree ("tenant_id","name");--> statement-breakpoint
CREATE INDEX "deals_tenant_status" ON "app"."deals" USING btree ("tenant_id","status");--> statement-breakpoint
CREATE INDEX "deals_tenant_contact" ON "app"."deals" USING btree ("tenant_id","contact_id");--> statement-breakpoint
CREATE INDEX "deals_tenant_company" ON "app"."deals" USING btree ("tenant_id","company_id");--> statement-breakpoint
CREATE INDEX "emails_tenant_deal" ON "app"."emails" USING btree ("tenant_id","deal_id");--> statement-breakpoint
CREATE INDEX "emails_tenant_sent" ON "app"."emails" USING btree ("tenant_id","sent_at");--> statement-breakpoint
CREATE INDEX "leads_tenant_contact" ON "app"."leads" USING btree ("tenant_id","contact_id");--> statement-breakpoint
CREATE INDEX "leads_tenant_company" ON "app"."leads" USING btree ("tenant_id","company_id");--> statement-breakpoint
CREATE INDEX "notes_tenant_deal" ON "app"."notes" USING btree ("tenant_id","deal_id");--> statement-breakpoint
CREATE INDEX "notes_tenant_contact" ON "app"."notes" USING btree ("tenant_id","contact_id");