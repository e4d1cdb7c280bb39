import { hostname, userInfo } from "node:os";
import { type AuditEventRow, auditEvents, type Db, type Queryable } from "@drover/db";
import { and, desc, eq, gte, inArray, lt, or, sql } from "drizzle-orm";

/**
 * The audit trail: who did what, kept in drover.audit_events. Rows are only ever inserted here
 * (the table's trigger refuses UPDATE, TRUNCATE and any DELETE but pruneAuditEvents's; migration
 * 0021) and read back newest first.
 */

/** One thing someone did, as recorded. */
export interface AuditEvent {
  /** The API key used; null for a change made outside the API (the keys command, a first start). */
  keyId: string | null;
  /** Who, as people name them: the key id, or `keys command (user@host)`. */
  actor: string;
  scopes: string;
  /** The RPC's name (`StartRun`) or the key change (`IssueApiKey`, `RevokeApiKey`). */
  action: string;
  tenantId: string | null;
  runId: string | null;
  /** The call's peer address, or `local`. */
  peer: string;
  /** `ok`, or the gRPC status code's name. */
  outcome: string;
  message: string | null;
  details: Record<string, string>;
}

/** Key changes, as their audit rows name them. */
export const KEY_ACTIONS = { issue: "IssueApiKey", revoke: "RevokeApiKey" } as const;

/** Longer values are cut: a caller controls them, and the trail must not be a place to store data. */
const MAX_VALUE_CHARS = 1024;

export async function recordAuditEvent(q: Queryable, event: AuditEvent): Promise<void> {
  await q.insert(auditEvents).values({
    keyId: event.keyId,
    actor: clip(event.actor),
    scopes: clip(event.scopes),
    action: event.action,
    tenantId: event.tenantId === null ? null : clip(event.tenantId),
    runId: event.runId,
    peer: clip(event.peer),
    outcome: event.outcome,
    message: event.message === null ? null : clip(event.message),
    details: Object.fromEntries(Object.entries(event.details).map(([k, v]) => [k, clip(v)])),
  });
}

/** Who made a change from this machine's shell: the keys command has no API key. */
export function localActor(what: string): string {
  let user = "unknown";
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the host still says where.
  }
  return `${what} (${user}@${hostname()})`;
}

export interface AuditFilter {
  /** undefined: every tenant's events and those of no tenant (an admin); otherwise these tenants'. */
  tenants: readonly string[] | undefined;
  tenantId?: string;
  runId?: string;
  action?: string;
  since?: Date;
  /** Events older than this id (the page token). */
  beforeId?: number;
  limit: number;
}

/** Newest first. */
export async function readAuditEvents(db: Db, filter: AuditFilter): Promise<AuditEventRow[]> {
  const where = [];
  if (filter.tenants) where.push(inArray(auditEvents.tenantId, [...filter.tenants]));
  if (filter.tenantId) where.push(eq(auditEvents.tenantId, filter.tenantId));
  // A run's events, and for a revert run the RevertRun that started it (recorded on the run it
  // reverts). Over 200,000 rows the plan is a BitmapOr of audit_events_run and the partial
  // audit_events_revert_run index, not a scan.
  if (filter.runId)
    where.push(
      or(
        eq(auditEvents.runId, filter.runId),
        sql`(${auditEvents.details} ? 'revert_run_id' and ${auditEvents.details}->>'revert_run_id' = ${filter.runId})`,
      ),
    );
  if (filter.action) where.push(eq(auditEvents.action, filter.action));
  if (filter.since) where.push(gte(auditEvents.at, filter.since));
  if (filter.beforeId !== undefined) where.push(lt(auditEvents.id, filter.beforeId));
  return db
    .select()
    .from(auditEvents)
    .where(where.length > 0 ? and(...where) : undefined)
    .orderBy(desc(auditEvents.id))
    .limit(filter.limit);
}

/**
 * Retention, as for notes: events older than DROVER_RETENTION_DAYS go, a batch per call so a
 * backlog never holds long locks (the reaper calls it each pass). The only DELETE the table's
 * trigger lets through: it names its cutoff in `drover.audit_prune_before` for this transaction
 * alone, and the trigger removes nothing younger than that, nor anything under a day old.
 */
export async function pruneAuditEvents(
  db: Db,
  options: { retentionDays: number; batch?: number },
): Promise<number> {
  const batch = options.batch ?? 1000;
  return db.transaction(async (tx) => {
    const [cutoff] = await tx.execute<{ at: string }>(sql`
      select set_config('drover.audit_prune_before',
                        (now() - make_interval(days => ${options.retentionDays}))::text, true) as at`);
    const gone = await tx.execute<{ id: string }>(sql`
      delete from drover.audit_events
       where id in (select id from drover.audit_events where at < ${cutoff!.at}::timestamptz
                     order by at limit ${batch})
       returning id`);
    return gone.length;
  });
}

/**
 * A caller's text made storable: cut to MAX_VALUE_CHARS, and control characters written out as
 * `\u0000` (Postgres refuses a NUL in text and in jsonb, and a refused request's bad bytes are
 * exactly what the trail must still record).
 */
function clip(value: string): string {
  const cut = value.length > MAX_VALUE_CHARS ? `${value.slice(0, MAX_VALUE_CHARS)}…` : value;
  return cut.replace(CONTROL, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f]/g;
