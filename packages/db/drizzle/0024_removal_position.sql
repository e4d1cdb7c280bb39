ALTER TABLE "drover"."migration_closures" ADD COLUMN "removed_through_kind" text;--> statement-breakpoint
ALTER TABLE "drover"."migration_closures" ADD COLUMN "removed_through_source_id" text;