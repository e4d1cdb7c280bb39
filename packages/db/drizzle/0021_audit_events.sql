CREATE TABLE "drover"."audit_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"key_id" text,
	"actor" text NOT NULL,
	"scopes" text DEFAULT '' NOT NULL,
	"action" text NOT NULL,
	"tenant_id" text,
	"run_id" uuid,
	"peer" text NOT NULL,
	"outcome" text NOT NULL,
	"message" text,
	"details" jsonb DEFAULT '{}'::jsonb NOT NULL
);
--> statement-breakpoint
CREATE INDEX "audit_events_run" ON "drover"."audit_events" USING btree ("run_id","id");--> statement-breakpoint
CREATE INDEX "audit_events_revert_run" ON "drover"."audit_events" USING btree (("details"->>'revert_run_id'),"id") WHERE "drover"."audit_events"."details" ? 'revert_run_id';--> statement-breakpoint
CREATE INDEX "audit_events_tenant" ON "drover"."audit_events" USING btree ("tenant_id","id");--> statement-breakpoint
CREATE INDEX "audit_events_at" ON "drover"."audit_events" USING btree ("at");--> statement-breakpoint
-- The audit trail is append-only, enforced here and not trusted to the application: a bug, a
-- compromised coordinator or a hand-typed statement cannot rewrite who did what. UPDATE and TRUNCATE
-- are always refused; DELETE only for the retention job, which sets `drover.audit_prune_before` (SET
-- LOCAL, its own transaction) to its cutoff. Even then only rows older than that cutoff go, and the
-- cutoff must be at least a day old (the shortest DROVER_RETENTION_DAYS), so the job cannot be
-- pointed at today's events. A superuser can still drop the trigger: that is a schema change, seen
-- in the database's own log, not a row quietly edited.
CREATE FUNCTION "drover"."audit_events_append_only"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  cutoff timestamptz := nullif(current_setting('drover.audit_prune_before', true), '')::timestamptz;
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF cutoff IS NOT NULL AND cutoff <= now() - interval '1 day' AND OLD.at < cutoff THEN
      RETURN OLD;
    END IF;
  END IF;
  RAISE EXCEPTION 'drover.audit_events is append-only: % is refused', TG_OP
    USING ERRCODE = 'insufficient_privilege',
          HINT = 'audit events are only inserted; old ones are removed by the retention job (DROVER_RETENTION_DAYS)';
END
$$;
--> statement-breakpoint
CREATE TRIGGER "audit_events_append_only" BEFORE UPDATE OR DELETE ON "drover"."audit_events"
  FOR EACH ROW EXECUTE FUNCTION "drover"."audit_events_append_only"();
--> statement-breakpoint
CREATE TRIGGER "audit_events_no_truncate" BEFORE TRUNCATE ON "drover"."audit_events"
  FOR EACH STATEMENT EXECUTE FUNCTION "drover"."audit_events_append_only"();
