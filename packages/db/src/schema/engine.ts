import { sql } from "drizzle-orm";
import {
  type AnyPgColumn,
  bigint,
  bigserial,
  boolean,
  check,
  doublePrecision,
  index,
  integer,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { runStatusIn, taskStatus, taskStatusIn, verificationStatusIn } from "../status-sql.js";
import {
  LIVE_RUN_STATUSES,
  RUN_STATUSES,
  TASK_STATUSES,
  VERIFICATION_REQUEST_STATUSES,
} from "../statuses.js";

/** Engine tables live in their own schema so they never collide with the product's (both have "notes"). */
export const drover = pgSchema("drover");

const timestamps = {
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
};

export const LEDGER_ACTIONS = ["created", "matched", "skipped"] as const;

export const runs = drover.table(
  "runs",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    tenantId: text("tenant_id").notNull(),
    source: text("source").notNull(),
    sourceAccount: text("source_account").notNull(),
    kinds: text("kinds").array().notNull(),
    /** The provider's phases filtered by the requested kinds, frozen at start: the plan is data. */
    plan: jsonb("plan").$type<string[][]>().notNull(),
    currentPhase: integer("current_phase").notNull().default(0),
    status: text("status", { enum: RUN_STATUSES }).notNull().default("pending"),
    /** Non-secret source settings (base url, stripes, ...). */
    sourceConfig: jsonb("source_config").$type<Record<string, unknown>>().notNull().default({}),
    /**
     * Plaintext credential written before secrets were encrypted. Nothing writes it any more: the
     * coordinator encrypts what it finds here at start and clears it.
     */
    legacySourceSecret: text("source_secret"),
    /**
     * The source credential, AES-256-GCM under the key named beside it (@drover/auth SecretKeyring,
     * the run id bound as associated data). Opened only by the worker's task runner; never returned
     * by any RPC.
     */
    sourceSecretCiphertext: text("source_secret_ciphertext"),
    sourceSecretKeyId: text("source_secret_key_id"),
    /** W3C trace context of the StartRun call, so tasks dispatched later join its trace. */
    traceContext: jsonb("trace_context").$type<Record<string, string>>(),
    error: text("error"),
    /**
     * The run's fair share of the pool (tasks in flight: running, or published and not yet
     * claimed), as the last dispatch round dealt it out. A worker whose task of this run ends
     * publishes the run's next ready tasks up to it at once (`handOnSlot`), without waiting for the
     * coordinator's round; null until the first round.
     */
    fairShare: integer("fair_share"),
    /**
     * Set while the pool keeps live runs' equal shares for them (the workers are busy,
     * fair-share.ts): the equal share itself, above which a task of this run gives its slot up
     * between windows even when no other run waits, the slot being kept for a run that is present.
     * Null while unused shares are lent.
     */
    shareCeiling: integer("share_ceiling"),
    verification: jsonb("verification"),
    /**
     * The share of the source account's daily allowance this run may spend per day (0 < share <= 1),
     * enforced by the budget keeper; null: no cap of its own.
     */
    dailyShare: doublePrecision("daily_share"),
    /**
     * Set on a revert run: the run whose created records it removes from the product. Unique, so a
     * run is reverted by one revert run at most (a stopped revert is resumed, a failed one retried).
     */
    revertsRunId: uuid("reverts_run_id").references((): AnyPgColumn => runs.id),
    /** A revert run started with force: other runs' links to the records it removes are cleared. */
    revertForce: boolean("revert_force").notNull().default(false),
    /**
     * A dry run walks the source like a real run and writes nothing to the product or the ledger:
     * its windows are rolled back after their outcomes are counted (window-writer.ts). It holds no
     * admission slot, so it is left out of runs_one_live_per_source.
     */
    dryRun: boolean("dry_run").notNull().default(false),
    /** Per-kind counts and task counts, frozen when the reaper prunes the run's tasks. */
    summary: jsonb("summary").$type<RunSummary>(),
    /**
     * A run that follows its source until cutover (StartRun follow): its interval, the cutover
     * request and its passes. Null for a run that finishes after its import. Moved only by the
     * follow transitions of the engine's run-transitions.ts.
     */
    follow: jsonb("follow").$type<RunFollow>(),
    /**
     * Deprecated: nothing reads or writes it any more. It stays for one release so that a
     * coordinator or worker of the previous version, still running during a rolling deploy, can
     * insert and update runs; the release after drops it (expand, then contract).
     */
    heartbeatAt: timestamp("heartbeat_at", { withTimezone: true }),
    startedAt: timestamp("started_at", { withTimezone: true }),
    finishedAt: timestamp("finished_at", { withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    check("runs_status_check", sql`${t.status} in ${runStatusIn(RUN_STATUSES)}`),
    // Admission, enforced by the database: two live runs can never write one tenant from one source,
    // even when two coordinators admit at the same instant.
    uniqueIndex("runs_one_live_per_source")
      .on(t.tenantId, t.source, t.sourceAccount)
      .where(sql`status in ${runStatusIn(LIVE_RUN_STATUSES)} and not dry_run`),
    check(
      "runs_source_secret_sealed",
      sql`(${t.sourceSecretCiphertext} is null) = (${t.sourceSecretKeyId} is null)`,
    ),
    index("runs_tenant_created").on(t.tenantId, t.createdAt),
    index("runs_status").on(t.status),
    uniqueIndex("runs_reverts_run").on(t.revertsRunId).where(sql`reverts_run_id is not null`),
  ],
);

export const tasks = drover.table(
  "tasks",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    kind: text("kind").notNull(),
    phase: integer("phase").notNull(),
    /** Identifies what the task walks (kind, stripe, page...): seeding the same unit twice is a no-op. */
    seedKey: text("seed_key").notNull(),
    /** Where the task starts, and (for cursor-walked sources) where its last committed window ended. */
    cursor: jsonb("cursor").$type<Record<string, unknown>>().notNull(),
    /** Rows committed past the cursor. Written only inside a window's transaction. */
    processedOffset: integer("processed_offset").notNull().default(0),
    status: text("status", { enum: TASK_STATUSES }).notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    /**
     * Claims since the task last committed a window (the claim adds one, a window's checkpoint sets
     * 0, a hand-back takes its claim back): what the reaper's limit counts, so a task that kills
     * its worker every time fails while a long walk whose workers die after it moved on does not.
     */
    attemptsSinceProgress: integer("attempts_since_progress").notNull().default(0),
    lockedBy: text("locked_by"),
    lockedAt: timestamp("locked_at", { withTimezone: true }),
    /**
     * The liveness record (drover.workers) of the worker that made the current claim: the reaper
     * releases a running task at once when that record has expired or is gone, instead of waiting
     * for its lock to go stale. Set by the claim only; read only while the task is running.
     */
    worker: uuid("worker"),
    availableAt: timestamp("available_at", { withTimezone: true }).notNull().defaultNow(),
    dispatchedAt: timestamp("dispatched_at", { withTimezone: true }),
    stats: jsonb("stats").$type<Record<string, number>>().notNull().default({}),
    /**
     * Per-slot accounting for sources written without a ledger (ledger mode `none`): source rows
     * this task read and rows it wrote to the destination, both moved by each window's checkpoint
     * in the window's transaction, so they never count more than was committed.
     */
    rowsRead: bigint("rows_read", { mode: "number" }).notNull().default(0),
    rowsWritten: bigint("rows_written", { mode: "number" }).notNull().default(0),
    /**
     * The source ids this task listed and handed to the writer (a ledgered source's page, a mail
     * task's deals), appended by the checkpoint of each listing's last window, so they commit with
     * the rows they name. Verification compares them with the ledger instead of listing the source
     * again. Null on a task that committed no listing (and on tasks of versions before this record).
     */
    listedIds: text("listed_ids").array(),
    lastError: text("last_error"),
    startedAt: timestamp("started_at", { withTimezone: true }),
    finishedAt: timestamp("finished_at", { withTimezone: true }),
    ...timestamps,
  },
  (t) => [
    check("tasks_status_check", sql`${t.status} in ${taskStatusIn(TASK_STATUSES)}`),
    uniqueIndex("tasks_run_seed_key").on(t.runId, t.seedKey),
    index("tasks_run_phase_status").on(t.runId, t.phase, t.status),
    index("tasks_dispatch").on(t.runId, t.status, t.availableAt),
    index("tasks_running_locked").on(t.lockedAt).where(sql`status = ${taskStatus.running}`),
    // In flight (task-dispatch.ts): a dispatch slice counts the other slices' tasks in flight over
    // every live run, a few hundred rows at most, without reading their pending backlogs.
    index("tasks_in_flight")
      .on(t.runId)
      .where(
        sql`status = ${taskStatus.running} or (status = ${taskStatus.pending} and dispatched_at is not null)`,
      ),
  ],
);

/**
 * One row per running worker process, heartbeated every few seconds: how the leader's reaper tells a
 * dead worker (SIGKILL, a lost host) from a slow one within seconds, and how the dispatcher knows
 * how many lane slots the pool has. A record is a lease: the worker moves `expires_at` forward by
 * its own liveness timeout, never once it has passed (engine worker-liveness.ts). An expired record
 * is dead for good: the reaper releases its tasks and deletes it, a claim under it is refused, and
 * the worker registers anew under a fresh id. Times are the database's, so hosts' clocks do not matter.
 */
export const workers = drover.table(
  "workers",
  {
    /** One registration of one worker process; a new one after its record expired. */
    id: uuid("id").primaryKey(),
    /** DROVER_WORKER_ID, for people: it also prefixes the worker's claim tokens. */
    workerId: text("worker_id").notNull(),
    laneWidth: integer("lane_width").notNull(),
    startedAt: timestamp("started_at", { withTimezone: true }).notNull().defaultNow(),
    heartbeatAt: timestamp("heartbeat_at", { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    /**
     * The worker's event loop is near full (services/worker/src/event-loop-load.ts): while any live
     * worker says so, the dispatcher keeps each live run's equal share for it instead of lending it.
     */
    busy: boolean("busy").notNull().default(false),
  },
  (t) => [index("workers_expires").on(t.expiresAt)],
);

export type WorkerRow = typeof workers.$inferSelect;

export const ledger = drover.table(
  "ledger",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    tenantId: text("tenant_id").notNull(),
    source: text("source").notNull(),
    sourceAccount: text("source_account").notNull(),
    kind: text("kind").notNull(),
    sourceId: text("source_id").notNull(),
    action: text("action", { enum: LEDGER_ACTIONS }).notNull(),
    recordType: text("record_type"),
    recordId: bigint("record_id", { mode: "number" }),
    reason: text("reason"),
    /** References to rows of a kind written in the same phase, resolved when the phase's barrier passes. */
    pendingRefs: jsonb("pending_refs").$type<Record<string, string>>(),
    /**
     * When a follow pass found the source row deleted (gone from its lists, confirmed by id): a
     * created record is marked deleted in the product then, a matched one only noted. Cleared if
     * the source lists the row again (restored).
     */
    sourceDeletedAt: timestamp("source_deleted_at", { withTimezone: true }),
    runId: uuid("run_id").notNull(),
    taskId: bigint("task_id", { mode: "number" }),
    ...timestamps,
  },
  (t) => [
    check("ledger_action_check", sql`${t.action} in ('created','matched','skipped')`),
    // The write-once slot: one ledger row per source row, whoever writes it and however often.
    uniqueIndex("ledger_source_row").on(t.tenantId, t.source, t.sourceAccount, t.kind, t.sourceId),
    index("ledger_run_kind_action").on(t.runId, t.kind, t.action),
    index("ledger_pending_refs").on(t.runId, t.kind).where(sql`pending_refs is not null`),
    // A product record's ledger rows: how a revert finds other runs' records that link to (or
    // matched) a record the reverted run created, one index probe per record.
    index("ledger_record").on(t.tenantId, t.recordType, t.recordId).where(sql`record_id is not null`),
  ],
);

export const NOTE_LEVELS = ["error", "warn", "info"] as const;

export const notes = drover.table(
  "notes",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    taskId: bigint("task_id", { mode: "number" }),
    level: text("level", { enum: NOTE_LEVELS }).notNull(),
    kind: text("kind").notNull(),
    subjectId: text("subject_id"),
    reason: text("reason").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    /**
     * When a later pass wrote the row this note is about, for a source without a ledger (a
     * re-drive of pg-table): the note no longer holds. Set in the transaction of the window that
     * wrote the row. A ledgered source never sets it: the ledger slot's update time says the same.
     */
    settledAt: timestamp("settled_at", { withTimezone: true }),
  },
  (t) => [
    index("notes_run_grouping").on(t.runId, t.level, t.kind, t.reason),
    index("notes_subject").on(t.kind, t.subjectId),
  ],
);

export const budgets = drover.table(
  "budgets",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    source: text("source").notNull(),
    sourceAccount: text("source_account").notNull(),
    burstCapacity: integer("burst_capacity").notNull().default(20),
    burstUsed: integer("burst_used").notNull().default(0),
    burstResetAt: timestamp("burst_reset_at", { withTimezone: true }),
    dailyRemaining: bigint("daily_remaining", { mode: "number" }),
    dailyResetAt: timestamp("daily_reset_at", { withTimezone: true }),
    exhaustedAt: timestamp("exhausted_at", { withTimezone: true }),
    spent: bigint("spent", { mode: "number" }).notNull().default(0),
    /**
     * The day the runs' daily shares are counted for, and the tokens granted to each run (by id) on
     * it: a leader that takes over mid-day goes on from them instead of granting every share afresh.
     */
    shareDayEndsAt: timestamp("share_day_ends_at", { withTimezone: true }),
    shareGranted: jsonb("share_granted").$type<Record<string, number>>().notNull().default({}),
    /**
     * The account's reset, learned from the source (its first answer after a refused probe): ms
     * past each multiple of daily_period_ms since the epoch. It beats the account's rule on later
     * days, under any leader; null until a probe found it.
     */
    dailyResetPhaseMs: bigint("daily_reset_phase_ms", { mode: "number" }),
    /** The phase of the last refusal seen before it: the real reset lies between; null when known to a candidate. */
    dailyResetAfterMs: bigint("daily_reset_after_ms", { mode: "number" }),
    dailyPeriodMs: bigint("daily_period_ms", { mode: "number" }),
    /** Where daily_reset_at comes from: the rule (a hint), a probe, the learned reset, or the source. */
    dailyResetBy: text("daily_reset_by").$type<"rule" | "probe" | "learned" | "stated">(),
    ...timestamps,
  },
  (t) => [uniqueIndex("budgets_account").on(t.source, t.sourceAccount)],
);

/**
 * A follow run's webhooks at its source (Pipedrive webhooks v2): the basic-auth credential each
 * delivery must carry, the webhooks registered with it, and how the run follows. The receiver
 * (services/receiver) checks a delivery against secret_sha256 only, so it never holds anything
 * that opens a source secret; the coordinator keeps the credential sealed (like source secrets,
 * context webhookSecretContext) to register the webhooks again. One row per run, made when it
 * starts following; removed_at set once its webhooks are deleted at the source.
 */
export const runWebhooks = drover.table("run_webhooks", {
  runId: uuid("run_id")
    .primaryKey()
    .references(() => runs.id, { onDelete: "cascade" }),
  authUser: text("auth_user").notNull(),
  /** Hex SHA-256 of the basic-auth password (32 random bytes: no dictionary to guess from). */
  secretSha256: text("secret_sha256").notNull(),
  secretCiphertext: text("secret_ciphertext").notNull(),
  secretKeyId: text("secret_key_id").notNull(),
  /** `webhooks` (registered at the source), `polling` (could not be: see reason), `removed`. */
  mode: text("mode").$type<"registering" | "webhooks" | "polling" | "removed">().notNull(),
  /** Why the run follows by polling (no public URL configured, the source refused), for its page. */
  reason: text("reason"),
  /** The source's ids of the webhooks registered for this run (to delete them at the end). */
  webhookIds: jsonb("webhook_ids").$type<string[]>().notNull().default([]),
  /** The last delivery the receiver accepted for this run (the lag of the event feed). */
  lastEventAt: timestamp("last_event_at", { withTimezone: true }),
  removedAt: timestamp("removed_at", { withTimezone: true }),
  ...timestamps,
});

/** A follow run's state (runs.follow). */
export interface RunFollow {
  intervalSeconds: number;
  /** When CompleteRun asked for cutover: the first pass that starts at or after it is the last. */
  cutoverAt: string | null;
  /** The passes closed or open, oldest first; pass 0 is the import's own catch-up. */
  passes: FollowPass[];
  /** How the run learns of changes between passes (the coordinator's run-webhooks.ts); absent: by passes alone. */
  feed?: FollowFeed;
}

/**
 * A follow run's change feed. With `webhooks` the source's events are applied as they come and a
 * pass is a rare reconcile, every `reconcileSeconds` (or the interval, if longer); with `polling`
 * (webhooks could not be registered: `reason`) passes come every interval as before.
 */
export interface FollowFeed {
  mode: "webhooks" | "polling";
  reason: string | null;
  reconcileSeconds: number | null;
  /** The newest event (its time at the source) turned into work. */
  lastEventAt: string | null;
}

/** One pass of a follow run over what changed at the source. */
export interface FollowPass {
  index: number;
  /** The updated_since it asks for: the previous pass's start (the run's start for pass 0). */
  since: string;
  /** When its tasks were seeded: they all have created_at at or after it (how changes are counted). */
  seededAt: string;
  /** No task of it is claimed before: the next pass's since, so nothing edited meanwhile is missed. */
  startsAt: string;
  finishedAt: string | null;
  /** Rows its tasks wrote (created, updated again, skipped or failed) or found deleted, once it finished. */
  changes: number | null;
  /** Of those, source rows it found deleted (or restored) and applied; absent before passes counted them. */
  deletions?: number | null;
}

export interface RunSummary {
  kinds: Record<string, Record<string, number>>;
  tasks: Record<string, number>;
}

export type RunRow = typeof runs.$inferSelect;
export type TaskRow = typeof tasks.$inferSelect;
export type LedgerRow = typeof ledger.$inferSelect;
export type NoteRow = typeof notes.$inferSelect;
export type BudgetRow = typeof budgets.$inferSelect;
export type LedgerAction = (typeof LEDGER_ACTIONS)[number];
export type NoteLevel = (typeof NOTE_LEVELS)[number];

/**
 * Who leads, and where to reach them: non-leader coordinators forward budget leases to the leader,
 * which keeps each account's schedule in memory.
 */
export const leadership = drover.table("leadership", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  address: text("address").notNull(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
});

/**
 * API keys issued at run time (`pnpm --filter @drover/coordinator keys issue`), alongside those
 * configured in DROVER_API_KEYS. Only the SHA-256 of each token is kept; a revoked key stays as a
 * record of who had access.
 */
export const apiKeys = drover.table(
  "api_keys",
  {
    keyId: text("key_id").primaryKey(),
    /** Lowercase hex SHA-256 of the bearer token. */
    tokenHash: text("token_hash").notNull(),
    /** `admin`, `worker`, `read:<id>`, `tenant:<id>` or `revert:<id>`. */
    scopes: text("scopes").array().notNull(),
    note: text("note"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
  },
  (t) => [uniqueIndex("api_keys_token_hash").on(t.tokenHash)],
);

export type ApiKeyRow = typeof apiKeys.$inferSelect;

/**
 * A tenant's migration of one source account, closed (CloseMigration): after `remove_after` the
 * leader's reaper removes the account's ledger rows in small batches and sets `removed_at`; a run of
 * the account after that imports as if new. Until then StartRun for the account is refused (a run
 * would write against a ledger about to go), and a reopen deletes the row.
 */
export const migrationClosures = drover.table(
  "migration_closures",
  {
    tenantId: text("tenant_id").notNull(),
    source: text("source").notNull(),
    sourceAccount: text("source_account").notNull(),
    closedAt: timestamp("closed_at", { withTimezone: true }).notNull().defaultNow(),
    removeAfter: timestamp("remove_after", { withTimezone: true }).notNull(),
    removedAt: timestamp("removed_at", { withTimezone: true }),
    /** Where the removal stands: every ledger row of the account up to this (kind, source id) is gone. */
    removedThroughKind: text("removed_through_kind"),
    removedThroughSourceId: text("removed_through_source_id"),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.source, t.sourceAccount] }),
    index("migration_closures_due").on(t.removeAfter).where(sql`${t.removedAt} is null`),
  ],
);

export type MigrationClosureRow = typeof migrationClosures.$inferSelect;

/**
 * Who did what: one row per run-changing call (StartRun, StopRun, ResumeRun, RetryRun, CompleteRun,
 * RevertRun), whether it succeeded or was refused after authentication, and per API-key change.
 * Append-only: migration 0021 puts a trigger on the table that refuses every UPDATE and TRUNCATE,
 * and every DELETE except the retention job's (which names its cutoff in `drover.audit_prune_before`,
 * at least a day old). No foreign key to runs: the trail outlives what it talks about.
 */
export const auditEvents = drover.table(
  "audit_events",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    at: timestamp("at", { withTimezone: true }).notNull().defaultNow(),
    /** The API key the call authenticated with; null for a change made outside the API (the keys command). */
    keyId: text("key_id"),
    /** Who, as people name them: the key id, or the keys command's operating-system user and host. */
    actor: text("actor").notNull(),
    /** The caller's scopes at the time, formatted (`tenant:acme+revert:acme`). */
    scopes: text("scopes").notNull().default(""),
    /** The RPC's name (`StartRun`, ...) or the key change (`IssueApiKey`, `RevokeApiKey`). */
    action: text("action").notNull(),
    tenantId: text("tenant_id"),
    runId: uuid("run_id"),
    /** The call's peer address (`10.0.0.7:51234`, as grpc-js reports it), or `local` for the keys command. */
    peer: text("peer").notNull(),
    /** `ok`, or the gRPC status code's name (`PERMISSION_DENIED`, `FAILED_PRECONDITION`, ...). */
    outcome: text("outcome").notNull(),
    /** The error's message when the outcome is not `ok`. */
    message: text("message"),
    /** What was asked beyond the run: a retry's filter, a revert's force, the key changed. */
    details: jsonb("details").$type<Record<string, string>>().notNull().default({}),
  },
  (t) => [
    index("audit_events_run").on(t.runId, t.id),
    // A revert is recorded on the run it reverts; the revert run's own history finds it by this.
    index("audit_events_revert_run")
      .on(sql`(${t.details}->>'revert_run_id')`, t.id)
      .where(sql`${t.details} ? 'revert_run_id'`),
    index("audit_events_tenant").on(t.tenantId, t.id),
    index("audit_events_at").on(t.at),
  ],
);

export type AuditEventRow = typeof auditEvents.$inferSelect;

/**
 * A finished run waiting to be checked against its source. Verification calls the source with the
 * customer's credential, so it runs on a worker (the only place the secret is opened); the
 * coordinator asks for it here and publishes the request on the task queue, and a worker claims it
 * exactly like a task. One row per run: a run that finishes again (after a retry) is asked for again.
 */
export const verificationRequests = drover.table(
  "verification_requests",
  {
    runId: uuid("run_id")
      .primaryKey()
      .references(() => runs.id, { onDelete: "cascade" }),
    /** The finish being verified: a result is stored only while the run still has this finish. */
    forFinishedAt: timestamp("for_finished_at", { withTimezone: true, precision: 6 }).notNull(),
    status: text("status", { enum: VERIFICATION_REQUEST_STATUSES }).notNull().default("pending"),
    /** Bumped by each on-demand request, so a VerifyRun waits for a verification made after it asked. */
    generation: integer("generation").notNull().default(1),
    sampleSize: integer("sample_size").notNull(),
    attempts: integer("attempts").notNull().default(0),
    notBefore: timestamp("not_before", { withTimezone: true }).notNull().defaultNow(),
    /** Unique per claim; the result is stored only by the claim that still holds the request. */
    claimToken: uuid("claim_token"),
    claimedBy: text("claimed_by"),
    heartbeatAt: timestamp("heartbeat_at", { withTimezone: true }),
    publishedAt: timestamp("published_at", { withTimezone: true }),
    lastError: text("last_error"),
    ...timestamps,
  },
  (t) => [
    check(
      "verification_requests_status_check",
      sql`${t.status} in ${verificationStatusIn(VERIFICATION_REQUEST_STATUSES)}`,
    ),
    index("verification_requests_due").on(t.status, t.notBefore),
  ],
);

export type VerificationRequestRow = typeof verificationRequests.$inferSelect;

/**
 * What a run's tasks learn about the source and must agree on, e.g. whether the account's mail
 * lists carry bodies. The first task to learn a fact settles it for the whole run.
 */
export const runFacts = drover.table(
  "run_facts",
  {
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    key: text("key").notNull(),
    value: jsonb("value").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.runId, t.key] })],
);

/**
 * One row per committed window, written in the window's transaction: the run's throughput over
 * time, for both ledger modes, read without scanning the ledger (a window stands for up to
 * hundreds of rows). Rows counts what the window wrote or failed, not what was already here.
 */
export const windowCommits = drover.table(
  "window_commits",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    taskId: bigint("task_id", { mode: "number" }).notNull(),
    rows: integer("rows").notNull(),
    committedAt: timestamp("committed_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("window_commits_run_time").on(t.runId, t.committedAt)],
);

/**
 * What a dry run would have put in the ledger, one row per source row it would create or match:
 * its windows are rolled back, so this is how later windows of the same dry run see parents (and
 * persons sharing an email) that a real run would have written earlier in the run. Never read by a
 * real run; deleted with the run.
 */
export const dryRunRows = drover.table(
  "dry_run_rows",
  {
    runId: uuid("run_id")
      .notNull()
      .references(() => runs.id, { onDelete: "cascade" }),
    kind: text("kind").notNull(),
    sourceId: text("source_id").notNull(),
    /** The key a later row would be matched on (a person's lower-cased email), when there is one. */
    matchKey: text("match_key"),
  },
  (t) => [
    primaryKey({ columns: [t.runId, t.kind, t.sourceId] }),
    index("dry_run_rows_match").on(t.runId, t.kind, t.matchKey),
  ],
);
