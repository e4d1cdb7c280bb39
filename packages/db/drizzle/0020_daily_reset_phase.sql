ALTER TABLE "drover"."budgets" ADD COLUMN "daily_reset_phase_ms" bigint;--> statement-breakpoint
ALTER TABLE "drover"."budgets" ADD COLUMN "daily_reset_after_ms" bigint;--> statement-breakpoint
ALTER TABLE "drover"."budgets" ADD COLUMN "daily_period_ms" bigint;--> statement-breakpoint
ALTER TABLE "drover"."budgets" ADD COLUMN "daily_reset_by" text;