CREATE TABLE "drover"."verification_requests" (
	"run_id" uuid PRIMARY KEY NOT NULL,
	"for_finished_at" timestamp (6) with time zone NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"generation" integer DEFAULT 1 NOT NULL,
	"sample_size" integer NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"not_before" timestamp with time zone DEFAULT now() NOT NULL,
	"claim_token" uuid,
	"claimed_by" text,
	"heartbeat_at" timestamp with time zone,
	"published_at" timestamp with time zone,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "verification_requests_status_check" CHECK ("drover"."verification_requests"."status" in ('pending','running','done'))
);
--> statement-breakpoint
ALTER TABLE "drover"."verification_requests" ADD CONSTRAINT "verification_requests_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "drover"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "verification_requests_due" ON "drover"."verification_requests" USING btree ("status","not_before");