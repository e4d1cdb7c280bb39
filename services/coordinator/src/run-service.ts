import { randomUUID } from "node:crypto";
import type { SecretKeyring } from "@drover/auth";
import { type Db, pgErrorCode, type RunRow, runs } from "@drover/db";
import { progressRun } from "@drover/engine";
import {
  type CallContext,
  Code,
  RpcError,
  type Run,
  type RunService,
  type ServiceImplementation,
  timestampFromDate,
} from "@drover/proto";
import type { Provider } from "@drover/provider-sdk";
import { injectTraceContext } from "@drover/telemetry";
import { and, desc, eq, getTableColumns, inArray, sql } from "drizzle-orm";
import { admitRun, conflict } from "./admission.js";
import { callerTenants, requireActsFor, requireVisibleTenant, visibleRun } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { explainMissingRow } from "./explain-missing.js";
import { buildPlan } from "./plan.js";
import { currentNoteGroups, type NoteGroupFilter } from "./run-outcomes.js";
import { fromProtoStatus, loadRun, runView, TERMINAL_STATUSES } from "./run-view.js";
import { sealSourceSecret } from "./source-secrets.js";
import { DEFAULT_BUCKETS, MAX_BUCKETS, runThroughput } from "./throughput.js";
import {
  invalid,
  optionalText,
  requireRunId,
  requireSettings,
  requireTenant,
  requireText,
  requireToken,
  requireUserKinds,
} from "./validation.js";
import type { Verifications } from "./verification-dispatch.js";

const WATCH_POLL_MS = 500;
const MAX_PAGE_SIZE = 500;

/**
 * The public API. Every call arrives authenticated (auth.ts); a tenant-scoped caller sees and
 * steers only its own tenants' runs, and another tenant's run is NOT_FOUND.
 */
export function runService(
  ctx: CoordinatorContext,
  secrets: SecretKeyring,
  verifications: Verifications,
): ServiceImplementation<typeof RunService> {
  const { db } = ctx;

  const provider = (name: string): Provider => {
    const p = ctx.providers.get(name);
    if (!p)
      throw invalid(
        `unknown source "${name.slice(0, 64)}"; known sources: ${[...ctx.providers.keys()].join(", ")}`,
      );
    return p;
  };

  const mustLoad = async (runId: string, call: CallContext): Promise<RunRow> =>
    visibleRun(call, await loadRun(db, requireRunId(runId)), runId);

  const respond = async (runId: string): Promise<{ run: Run }> => ({
    run: await runView(db, (await loadRun(db, runId))!),
  });

  /** Moves the run on at once (barrier, stop settling) and publishes work, instead of waiting for the reaper. */
  const nudge = async (runId: string) => {
    await progressRun({ db, providers: ctx.providers, notesCap: ctx.config.DROVER_NOTES_CAP }, runId);
    await ctx.topUp(runId);
  };

  return {
    async startRun(req, call) {
      const tenantId = requireTenant(req.tenantId);
      requireActsFor(call, tenantId);
      const p = provider(requireText("source", req.source, 64));
      const sourceAccount = requireText("source_account", req.sourceAccount, 256);
      const kinds = requireUserKinds(p, req.kinds);
      const config = req.sourceConfig;
      const baseUrl = optionalText("source_config.base_url", config?.baseUrl ?? "", 2048);
      const apiToken = requireToken("source_config.api_token", config?.apiToken ?? "", 4096);
      const settings = requireSettings("source_config.settings", config?.settings ?? {});
      const problem = p.validateConfig({ baseUrl, apiToken, settings });
      if (problem) throw invalid(`source_config: ${problem}`);

      const runId = randomUUID();
      const sealed = apiToken ? sealSourceSecret(secrets, runId, apiToken) : undefined;
      const plan = buildPlan(p, kinds);
      const run = await admitRun(db, p, {
        id: runId,
        tenantId,
        source: p.name,
        sourceAccount,
        kinds: plan.flat(),
        plan,
        sourceConfig: { baseUrl, settings },
        sourceSecretCiphertext: sealed?.ciphertext ?? null,
        sourceSecretKeyId: sealed?.keyId ?? null,
        traceContext: injectTraceContext(),
      });
      ctx.logger.info({ run_id: run.id, tenant_id: tenantId, source: p.name, kinds }, "run started");
      await nudge(run.id);
      return { run: await runView(db, (await loadRun(db, run.id))!) };
    },

    async stopRun(req, call) {
      const run = await mustLoad(req.runId, call);
      if (run.status === "succeeded" || run.status === "failed") {
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `run ${run.id} has already ${run.status}; only a running run can be stopped`,
        );
      }
      if (run.status === "pending" || run.status === "running") {
        await db.transaction(async (tx) => {
          // The claim is fenced on the run being 'running', so once this commits no task starts.
          await tx.execute(sql`update drover.runs set status = 'stopping', updated_at = now()
                                where id = ${run.id}::uuid and status in ('pending', 'running')`);
          await tx.execute(sql`update drover.tasks set status = 'cancelled', finished_at = now(), updated_at = now()
                                where run_id = ${run.id}::uuid and status = 'pending'`);
        });
        ctx.logger.info({ run_id: run.id }, "run stopping");
      }
      await nudge(run.id);
      return respond(run.id);
    },

    async resumeRun(req, call) {
      const run = await mustLoad(req.runId, call);
      await rearm(db, run, RESUME);
      await nudge(run.id);
      return respond(run.id);
    },

    async retryRun(req, call) {
      const run = await mustLoad(req.runId, call);
      await rearm(db, run, RETRY);
      await nudge(run.id);
      return respond(run.id);
    },

    async getRun(req, call) {
      const run = await mustLoad(req.runId, call);
      return { run: await runView(db, run) };
    },

    async listRuns(req, call) {
      const pageSize = req.pageSize === 0 ? 50 : req.pageSize;
      if (pageSize < 0 || pageSize > MAX_PAGE_SIZE)
        throw invalid(`page_size must be between 1 and ${MAX_PAGE_SIZE}`);
      const filters = [];
      if (req.tenantId) filters.push(eq(runs.tenantId, requireTenant(req.tenantId)));
      // A tenant-scoped caller's listing holds its own tenants' runs and nothing else.
      const tenants = callerTenants(call);
      if (tenants) filters.push(inArray(runs.tenantId, [...tenants]));
      if (req.statuses.length > 0) {
        const statuses = req.statuses.map((s) => fromProtoStatus(s));
        if (statuses.some((s) => s === undefined)) throw invalid("statuses holds an unknown status");
        filters.push(inArray(runs.status, statuses as RunRow["status"][]));
      }
      if (req.pageToken) {
        const [at, id] = decodePageToken(req.pageToken);
        // Compared at the database's microsecond precision: a JS Date would drop the microseconds and
        // skip the rest of a page's millisecond (runs admitted in one millisecond, or one statement).
        filters.push(sql`(${runs.createdAt}, ${runs.id}) < (${at}::timestamptz, ${id}::uuid)`);
      }
      const rows = await db
        .select({ ...getTableColumns(runs), cursorAt: sql<string>`${CURSOR_AT}` })
        .from(runs)
        .where(filters.length > 0 ? and(...filters) : undefined)
        .orderBy(desc(runs.createdAt), desc(runs.id))
        .limit(pageSize + 1);
      const page = rows.slice(0, pageSize);
      const last = page[page.length - 1];
      return {
        runs: await Promise.all(page.map((r) => runView(db, r))),
        nextPageToken: rows.length > pageSize && last ? encodePageToken(last) : "",
      };
    },

    async *watchRun(req, call) {
      const first = await mustLoad(req.runId, call);
      let previous = "";
      let run: RunRow | undefined = first;
      while (run && !call.signal.aborted) {
        const view = await runView(db, run);
        const digest = JSON.stringify(
          [view.status, view.currentPhase, view.progress, view.tasks, view.budget],
          (_k, v) => (typeof v === "bigint" ? v.toString() : v),
        );
        if (digest !== previous) {
          previous = digest;
          yield { run: view };
        }
        if (TERMINAL_STATUSES.includes(run.status)) return;
        await new Promise((r) => setTimeout(r, WATCH_POLL_MS));
        run = await loadRun(db, first.id);
      }
    },

    async listNotes(req, call) {
      const run = await mustLoad(req.runId, call);
      const samples = req.samples === 0 ? 5 : req.samples;
      if (samples < 0 || samples > 100) throw invalid("samples must be between 1 and 100");
      if (req.level && !["error", "warn", "info"].includes(req.level))
        throw invalid('level must be "error", "warn" or "info"');
      optionalText("kind", req.kind, 64);
      return {
        groups: await currentNoteGroups(db, run, {
          kind: req.kind,
          level: (req.level || undefined) as NoteGroupFilter["level"],
          samples,
        }),
      };
    },

    async explainRecord(req, call) {
      const tenantId = requireTenant(req.tenantId);
      requireVisibleTenant(call, tenantId);
      const source = requireText("source", req.source, 64);
      const sourceAccount = requireText("source_account", req.sourceAccount, 256);
      const kind = requireText("kind", req.kind, 64);
      const sourceId = requireText("source_id", req.sourceId, 256);
      const [entry] = await db.execute<{
        action: string;
        record_type: string | null;
        record_id: string | null;
        run_id: string;
        task_id: string | null;
        reason: string | null;
        updated_at: Date;
      }>(sql`
        select action, record_type, record_id, run_id, task_id, reason, updated_at from drover.ledger
         where tenant_id = ${tenantId} and source = ${source} and source_account = ${sourceAccount}
           and kind = ${kind} and source_id = ${sourceId}`);
      const related = await db.execute<{
        level: string;
        reason: string;
        run_id: string;
        task_id: string | null;
        created_at: Date;
      }>(sql`
        select n.level, n.reason, n.run_id, n.task_id, n.created_at from drover.notes n
          join drover.runs r on r.id = n.run_id
         where r.tenant_id = ${tenantId} and r.source = ${source} and r.source_account = ${sourceAccount}
           and n.kind = ${kind} and n.subject_id = ${sourceId}
         order by n.id desc limit 50`);
      const notesOut = related.map((n) => ({
        level: n.level,
        kind,
        subjectId: sourceId,
        reason: n.reason,
        runId: n.run_id,
        taskId: n.task_id ?? "",
        createdAt: timestampFromDate(new Date(n.created_at)),
      }));
      if (!entry) {
        const why = related[0]?.reason;
        return {
          found: false,
          notes: notesOut,
          explanation: why
            ? `${kind} ${sourceId} never reached the ledger: ${why}`
            : await explainMissingRow(db, { tenantId, source, sourceAccount, kind, sourceId }),
        };
      }
      return {
        found: true,
        entry: {
          kind,
          sourceId,
          action: entry.action,
          recordType: entry.record_type ?? "",
          recordId: entry.record_id ?? "",
          runId: entry.run_id,
          taskId: entry.task_id ?? "",
          reason: entry.reason ?? "",
          recordedAt: timestampFromDate(new Date(entry.updated_at)),
        },
        notes: notesOut,
        explanation:
          entry.action === "skipped"
            ? `${kind} ${sourceId} was skipped: ${entry.reason}`
            : `${kind} ${sourceId} was ${entry.action} as ${entry.record_type} ${entry.record_id} by run ${entry.run_id}`,
      };
    },

    async getThroughput(req, call) {
      const run = await mustLoad(req.runId, call);
      const buckets = req.buckets === 0 ? DEFAULT_BUCKETS : req.buckets;
      if (buckets < 1 || buckets > MAX_BUCKETS) throw invalid(`buckets must be between 1 and ${MAX_BUCKETS}`);
      // A pruned run keeps its ledger rows (its failed rows' notes are gone): still worth drawing.
      return runThroughput(db, run, buckets);
    },

    async verifyRun(req, call) {
      const run = await mustLoad(req.runId, call);
      if (!TERMINAL_STATUSES.includes(run.status)) {
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `run ${run.id} is ${run.status}; it is verified automatically when it finishes, or verify it then`,
        );
      }
      if (run.summary) throw prunedError(run.id);
      return { verification: await verifications.onDemand(run, call) };
    },
  };

  /**
   * Resume and retry are one operation: a run in the right state gets its cancelled (resume) or
   * failed (retry) tasks back as pending, and its barrier rewound to the lowest of them.
   */
  async function rearm(database: Db, run: RunRow, how: Rearm) {
    if (run.status !== how.runStatus) {
      throw new RpcError(
        Code.FAILED_PRECONDITION,
        `run ${run.id} is ${run.status}; only a ${how.runStatus} run can be ${how.verb}`,
      );
    }
    if (run.summary) throw prunedError(run.id);
    const { taskStatus: from, resetAttempts } = how;
    try {
      await database.transaction(async (tx) => {
        // Back to running first: the partial unique index re-checks admission, and a live sibling
        // makes this statement fail with 23505, which becomes ALREADY_EXISTS.
        await tx.execute(sql`update drover.runs set status = 'running', error = null, finished_at = null, updated_at = now()
                              where id = ${run.id}::uuid`);
        const [lowest] = await tx.execute<{ phase: number | null }>(sql`
          with rearmed as (
            update drover.tasks
               set status = 'pending', available_at = now(), dispatched_at = null, locked_by = null,
                   finished_at = null, updated_at = now()
                   ${resetAttempts ? sql`, attempts = 0` : sql``}
             where run_id = ${run.id}::uuid and status = ${from}
            returning phase)
          select min(phase) as phase from rearmed`);
        // Rewind the barrier to the lowest phase with work again; it re-advances from there.
        if (lowest?.phase !== null && lowest?.phase !== undefined) {
          await tx.execute(sql`update drover.runs set current_phase = least(current_phase, ${lowest.phase})
                                where id = ${run.id}::uuid`);
        }
      });
    } catch (err) {
      if (pgErrorCode(err) === "23505") throw await conflict(database, run, run.id);
      throw err;
    }
  }
}

/** created_at to the microsecond, as the page token carries it. */
const CURSOR_AT = sql`to_char(${runs.createdAt} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

function encodePageToken(run: { cursorAt: string; id: string }): string {
  return Buffer.from(`${run.cursorAt}|${run.id}`).toString("base64url");
}

function decodePageToken(token: string): [string, string] {
  const [at, id] = Buffer.from(token, "base64url").toString().split("|");
  if (
    !id ||
    !at ||
    !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$/.test(at) ||
    Number.isNaN(new Date(at).getTime())
  ) {
    throw invalid("page_token is not a token this server issued");
  }
  return [at, requireRunId(id)];
}

interface Rearm {
  runStatus: "stopped" | "failed";
  taskStatus: "cancelled" | "failed";
  /** Retry starts the failed tasks' attempts afresh; resume keeps what was spent. */
  resetAttempts: boolean;
  verb: string;
}

const RESUME: Rearm = {
  runStatus: "stopped",
  taskStatus: "cancelled",
  resetAttempts: false,
  verb: "resumed",
};
const RETRY: Rearm = { runStatus: "failed", taskStatus: "failed", resetAttempts: true, verb: "retried" };

function prunedError(runId: string): RpcError {
  return new RpcError(
    Code.FAILED_PRECONDITION,
    `run ${runId} is past retention and its tasks were pruned; start a new run (the ledger keeps what was imported)`,
  );
}
