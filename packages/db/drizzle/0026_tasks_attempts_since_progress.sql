-- Claims since the task last committed a window: what the reaper's limit counts (engine
-- task-transitions.ts), so a long walk whose workers die after it moved on is not given up.
ALTER TABLE "drover"."tasks" ADD COLUMN "attempts_since_progress" integer DEFAULT 0 NOT NULL;