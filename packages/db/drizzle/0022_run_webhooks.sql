CREATE TABLE "drover"."run_webhooks" (
	"run_id" uuid PRIMARY KEY NOT NULL,
	"auth_user" text NOT NULL,
	"secret_sha256" text NOT NULL,
	"secret_ciphertext" text NOT NULL,
	"secret_key_id" text NOT NULL,
	"mode" text NOT NULL,
	"reason" text,
	"webhook_ids" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"last_event_at" timestamp with time zone,
	"removed_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "drover"."run_webhooks" ADD CONSTRAINT "run_webhooks_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "drover"."runs"("id") ON DELETE cascade ON UPDATE no action;