import { type RunService, type ServiceImplementation, timestampFromDate } from "@drover/proto";
import { sql } from "drizzle-orm";
import { requireVisibleTenant } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { Precondition } from "./domain-errors.js";
import { explainMissingRow } from "./explain-missing.js";
import { loadVisibleRun, prunedError } from "./run-access.js";
import { TERMINAL_STATUSES } from "./run-view.js";
import { requireKnownKind, requireProvider, requireTenant, requireText } from "./validation.js";
import type { Verifications } from "./verification-dispatch.js";

type RunExplain = Pick<ServiceImplementation<typeof RunService>, "explainRecord" | "verifyRun">;

/**
 * What happened, asked after the fact: a source record's story (ledger entry and notes, or why it
 * never reached the ledger), and a finished run checked against its source.
 */
export function runExplain(ctx: CoordinatorContext, verifications: Verifications): RunExplain {
  const { db } = ctx;
  return {
    async explainRecord(req, call) {
      const tenantId = requireTenant(req.tenantId);
      requireVisibleTenant(call, tenantId);
      const p = requireProvider(ctx.providers, requireText("source", req.source, 64));
      const source = p.name;
      const sourceAccount = requireText("source_account", req.sourceAccount, 256);
      const kind = requireKnownKind(p, requireText("kind", req.kind, 64));
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
        settled_at: Date | null;
      }>(sql`
        select n.level, n.reason, n.run_id, n.task_id, n.created_at, n.settled_at from drover.notes n
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
        const why = related[0];
        // A source without a ledger: a re-drive that wrote the row settled the notes about it.
        const explanation = !why
          ? await explainMissingRow(db, { tenantId, source, sourceAccount, kind, sourceId })
          : why.settled_at
            ? `${kind} ${sourceId} failed (${why.reason}), then a re-drive of run ${why.run_id} wrote it at ${new Date(why.settled_at).toISOString()}; this source keeps no ledger`
            : `${kind} ${sourceId} never reached the ledger: ${why.reason}`;
        return { found: false, notes: notesOut, explanation };
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

    async verifyRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      if (!TERMINAL_STATUSES.includes(run.status)) {
        throw new Precondition(
          `run ${run.id} is ${run.status}; it is verified automatically when it finishes, or verify it then`,
          "RUN_NOT_FINISHED",
        );
      }
      if (run.summary) throw prunedError(run.id);
      if (run.dryRun)
        throw new Precondition(
          `run ${run.id} is a dry run: it wrote nothing to verify; its report is on GetRun (dry_run_report)`,
          "DRY_RUN",
        );
      return { verification: await verifications.onDemand(run, call) };
    },
  };
}
