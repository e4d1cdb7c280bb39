CREATE TABLE "drover"."api_keys" (
	"key_id" text PRIMARY KEY NOT NULL,
	"token_hash" text NOT NULL,
	"scopes" text[] NOT NULL,
	"note" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "drover"."runs" ADD COLUMN "source_secret_ciphertext" text;--> statement-breakpoint
ALTER TABLE "drover"."runs" ADD COLUMN "source_secret_key_id" text;--> statement-breakpoint
CREATE UNIQUE INDEX "api_keys_token_hash" ON "drover"."api_keys" USING btree ("token_hash");--> statement-breakpoint
ALTER TABLE "drover"."runs" ADD CONSTRAINT "runs_source_secret_sealed" CHECK (("drover"."runs"."source_secret_ciphertext" is null) = ("drover"."runs"."source_secret_key_id" is null));