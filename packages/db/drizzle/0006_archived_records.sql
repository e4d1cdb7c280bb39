ALTER TABLE "app"."deals" ADD COLUMN "archived" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "app"."leads" ADD COLUMN "archived" boolean DEFAULT false NOT NULL;