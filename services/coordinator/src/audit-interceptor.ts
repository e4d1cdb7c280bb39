import { formatScopes } from "@drover/auth";
import { type Db, runs } from "@drover/db";
import { Code, callerStatus, type Interceptor, type MessageShape, RunService } from "@drover/proto";
import type { Logger } from "@drover/telemetry";
import { eq } from "drizzle-orm";
import { type AuditEvent, recordAuditEvent } from "./audit-trail.js";
import { authenticatedCaller } from "./auth.js";

/**
 * Records every run-changing call in the audit trail, once, at the gRPC edge: it sits outside the
 * auth interceptor, so a call refused after authentication (PERMISSION_DENIED, and every refusal
 * a handler makes) is recorded like one that succeeded. A call nobody authenticated names no one
 * and is not recorded (the log has it). The row is written when the outcome is known and before
 * the caller hears it; if the database cannot take it then, the call's answer stands (the change
 * happened, or did not) and the event goes to the log at error level with every field, the one
 * place it is then kept.
 */

type Method = typeof RunService.method;
type Request<K extends keyof Method> = MessageShape<Method[K]["input"]>;

/** What each audited method names beyond the caller: the run, or the tenant, and what was asked. */
interface Subject {
  runId?: string;
  tenantId?: string;
  details: Record<string, string>;
}

const AUDITED: { [K in keyof Method]?: (req: Request<K>) => Subject } = {
  startRun: (req) => ({
    tenantId: req.tenantId,
    details: {
      source: req.source,
      source_account: req.sourceAccount,
      ...(req.kinds.length > 0 ? { kinds: req.kinds.join(",") } : {}),
      ...(req.dryRun ? { dry_run: "true" } : {}),
      ...(req.follow ? { follow: "true" } : {}),
    },
  }),
  stopRun: (req) => ({ runId: req.runId, details: {} }),
  resumeRun: (req) => ({ runId: req.runId, details: {} }),
  completeRun: (req) => ({ runId: req.runId, details: {} }),
  retryRun: (req) => ({
    runId: req.runId,
    details: {
      ...(req.kind ? { kind: req.kind } : {}),
      ...(req.reason ? { reason: req.reason } : {}),
      ...(req.sourceIds.length > 0 ? { source_ids: req.sourceIds.join(",") } : {}),
    },
  }),
  revertRun: (req) => ({ runId: req.runId, details: { force: String(req.force) } }),
  closeMigration: (req) => ({
    tenantId: req.tenantId,
    details: {
      source: req.source,
      source_account: req.sourceAccount,
      ...(req.reopen ? { reopen: "true" } : {}),
    },
  }),
};

/** `drover.v1.RunService/StopRun` → its RPC name and what to record of its request. */
const AUDITED_BY_PATH = new Map(
  Object.entries(AUDITED).map(([local, subject]) => {
    const name = RunService.method[local as keyof Method].name;
    return [
      `${RunService.typeName}/${name}`,
      { action: name, subject: subject as (req: unknown) => Subject },
    ];
  }),
);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** How a call ended: its response, or what it threw. */
type Ending = { ok: true; response: unknown } | { ok: false; error: unknown };

export function auditInterceptor(db: Db, logger: Logger): Interceptor {
  return async (call, next, request) => {
    const audited = AUDITED_BY_PATH.get(call.method);
    if (!audited) return next();
    let ending: Ending;
    try {
      ending = { ok: true, response: await next() };
    } catch (error) {
      ending = { ok: false, error };
    }
    const principal = authenticatedCaller(call);
    if (principal) {
      const event: AuditEvent = {
        keyId: principal.keyId,
        actor: principal.keyId,
        scopes: formatScopes(principal.scopes),
        action: audited.action,
        peer: call.peer,
        ...(await what(db, audited.action, subject(request, audited.subject), ending)),
        ...outcomeOf(ending),
      };
      try {
        await recordAuditEvent(db, event);
      } catch (err) {
        logger.error({ err, audit: event }, "the audit event could not be recorded");
      }
    }
    if (!ending.ok) throw ending.error;
    return ending.response as never;
  };
}

/** What the request names; a malformed request (refused INVALID_ARGUMENT) names nothing. */
function subject(request: () => unknown, of: (req: unknown) => Subject): Subject {
  try {
    return of(request());
  } catch {
    return { details: {} };
  }
}

/**
 * The run and tenant the call was about, and its details. A started run is the response's; a revert
 * is recorded on the run it reverts, naming the revert run it started; a run id that is not one is
 * kept in the details as it was sent.
 */
async function what(
  db: Db,
  action: string,
  asked: Subject,
  ending: Ending,
): Promise<Pick<AuditEvent, "runId" | "tenantId" | "details">> {
  const answered = ending.ok
    ? (ending.response as { run?: { id: string; tenantId: string } } | undefined)?.run
    : undefined;
  const details = { ...asked.details };
  let runId: string | null = null;
  if (asked.runId !== undefined) {
    if (UUID.test(asked.runId)) runId = asked.runId.toLowerCase();
    else if (asked.runId) details.run_id = asked.runId;
  }
  if (answered && action === RunService.method.revertRun.name) details.revert_run_id = answered.id;
  else if (answered) runId = answered.id;
  const tenantId = answered
    ? answered.tenantId
    : runId
      ? ((await tenantOf(db, runId)) ?? null)
      : asked.tenantId || null;
  return { runId, tenantId, details };
}

/** The run's tenant, so that its tenant's auditors see refused calls on it too. */
async function tenantOf(db: Db, runId: string): Promise<string | undefined> {
  try {
    const [row] = await db.select({ tenantId: runs.tenantId }).from(runs).where(eq(runs.id, runId));
    return row?.tenantId;
  } catch {
    return undefined;
  }
}

/** As the caller heard it (add-service.ts statusFor): unexpected errors are INTERNAL, never their text. */
function outcomeOf(ending: Ending): Pick<AuditEvent, "outcome" | "message"> {
  if (ending.ok) return { outcome: "ok", message: null };
  const heard = callerStatus(ending.error);
  return { outcome: Code[heard.code] ?? String(heard.code), message: heard.message };
}
