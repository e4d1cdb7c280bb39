ALTER TABLE "drover"."runs" ADD COLUMN "reverts_run_id" uuid;--> statement-breakpoint
ALTER TABLE "drover"."runs" ADD COLUMN "revert_force" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "drover"."runs" ADD CONSTRAINT "runs_reverts_run_id_runs_id_fk" FOREIGN KEY ("reverts_run_id") REFERENCES "drover"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "ledger_record" ON "drover"."ledger" USING btree ("tenant_id","record_type","record_id") WHERE record_id is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "runs_reverts_run" ON "drover"."runs" USING btree ("reverts_run_id") WHERE reverts_run_id is not null;