CREATE TABLE "drover"."window_commits" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"run_id" uuid NOT NULL,
	"task_id" bigint NOT NULL,
	"rows" integer NOT NULL,
	"committed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "drover"."window_commits" ADD CONSTRAINT "window_commits_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "drover"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "window_commits_run_time" ON "drover"."window_commits" USING btree ("run_id","committed_at");