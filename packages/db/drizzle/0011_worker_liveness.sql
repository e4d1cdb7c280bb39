CREATE TABLE "drover"."workers" (
	"id" uuid PRIMARY KEY NOT NULL,
	"worker_id" text NOT NULL,
	"lane_width" integer NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"heartbeat_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "drover"."runs" ADD COLUMN "fair_share" integer;--> statement-breakpoint
ALTER TABLE "drover"."tasks" ADD COLUMN "worker" uuid;--> statement-breakpoint
CREATE INDEX "workers_expires" ON "drover"."workers" USING btree ("expires_at");