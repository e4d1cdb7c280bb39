CREATE TABLE "drover"."leadership" (
	"name" text PRIMARY KEY NOT NULL,
	"holder" text NOT NULL,
	"address" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
