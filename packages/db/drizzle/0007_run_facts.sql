CREATE TABLE "drover"."run_facts" (
	"run_id" uuid NOT NULL,
	"key" text NOT NULL,
	"value" jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "run_facts_run_id_key_pk" PRIMARY KEY("run_id","key")
);
--> statement-breakpoint
ALTER TABLE "drover"."run_facts" ADD CONSTRAINT "run_facts_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "drover"."runs"("id") ON DELETE cascade ON UPDATE no action;