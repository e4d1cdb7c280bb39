CREATE TABLE "drover"."migration_closures" (
	"tenant_id" text NOT NULL,
	"source" text NOT NULL,
	"source_account" text NOT NULL,
	"closed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"remove_after" timestamp with time zone NOT NULL,
	"removed_at" timestamp with time zone,
	CONSTRAINT "migration_closures_tenant_id_source_source_account_pk" PRIMARY KEY("tenant_id","source","source_account")
);
--> statement-breakpoint
CREATE INDEX "migration_closures_due" ON "drover"."migration_closures" USING btree ("remove_after") WHERE "drover"."migration_closures"."removed_at" is null;