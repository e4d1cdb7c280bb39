CREATE TABLE "app"."room_events" (
	"tenant_id" text NOT NULL,
	"id" text NOT NULL,
	"room_id" uuid NOT NULL,
	"data" jsonb NOT NULL,
	"copied_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "room_events_tenant_id_id_pk" PRIMARY KEY("tenant_id","id")
);
--> statement-breakpoint
ALTER TABLE "drover"."tasks" ADD COLUMN "rows_read" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "drover"."tasks" ADD COLUMN "rows_written" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX "room_events_tenant_room" ON "app"."room_events" USING btree ("tenant_id","room_id");