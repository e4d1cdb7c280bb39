CREATE TABLE "drover"."dry_run_rows" (
	"run_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"source_id" text NOT NULL,
	"match_key" text,
	CONSTRAINT "dry_run_rows_run_id_kind_source_id_pk" PRIMARY KEY("run_id","kind","source_id")
);
--> statement-breakpoint
DROP INDEX "drover"."runs_one_live_per_source";--> statement-breakpoint
ALTER TABLE "drover"."runs" ADD COLUMN "dry_run" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "drover"."dry_run_rows" ADD CONSTRAINT "dry_run_rows_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "drover"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "dry_run_rows_match" ON "drover"."dry_run_rows" USING btree ("run_id","kind","match_key");--> statement-breakpoint
CREATE UNIQUE INDEX "runs_one_live_per_source" ON "drover"."runs" USING btree ("tenant_id","source","source_account") WHERE status in ('pending','running','stopping') and not dry_run;