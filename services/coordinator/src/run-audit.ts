import type { AuditEventRow } from "@drover/db";
import {
  type AuditEventSchema,
  type MessageInitShape,
  type RunService,
  type ServiceImplementation,
  timestampDate,
  timestampFromDate,
} from "@drover/proto";
import { readAuditEvents } from "./audit-trail.js";
import { callerTenants } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { invalid, optionalText, requireRunId, requireTenant } from "./validation.js";

const DEFAULT_PAGE_SIZE = 50;
const MAX_PAGE_SIZE = 500;

type RunAudit = Pick<ServiceImplementation<typeof RunService>, "listAuditEvents">;

/**
 * The audit trail, read back (audit-trail.ts). A tenant's key sees its tenants' events, including
 * calls on its runs that were refused; events of no tenant (API-key changes, calls naming no run
 * that exists) are an admin's alone.
 */
export function runAudit(ctx: CoordinatorContext): RunAudit {
  return {
    async listAuditEvents(req, call) {
      const pageSize = req.pageSize === 0 ? DEFAULT_PAGE_SIZE : req.pageSize;
      if (pageSize < 0 || pageSize > MAX_PAGE_SIZE)
        throw invalid(`page_size must be between 1 and ${MAX_PAGE_SIZE}`);
      const rows = await readAuditEvents(ctx.db, {
        tenants: callerTenants(call),
        ...(req.tenantId ? { tenantId: requireTenant(req.tenantId) } : {}),
        ...(req.runId ? { runId: requireRunId(req.runId) } : {}),
        ...(req.action ? { action: optionalText("action", req.action, 64) } : {}),
        ...(req.since ? { since: timestampDate(req.since) } : {}),
        ...(req.pageToken ? { beforeId: decodePageToken(req.pageToken) } : {}),
        limit: pageSize + 1,
      });
      const page = rows.slice(0, pageSize);
      const last = page[page.length - 1];
      return {
        events: page.map(toAuditEvent),
        nextPageToken: rows.length > pageSize && last ? encodePageToken(last.id) : "",
      };
    },
  };
}

function toAuditEvent(row: AuditEventRow): MessageInitShape<typeof AuditEventSchema> {
  return {
    id: String(row.id),
    at: timestampFromDate(row.at),
    keyId: row.keyId ?? "",
    actor: row.actor,
    scopes: row.scopes,
    action: row.action,
    tenantId: row.tenantId ?? "",
    runId: row.runId ?? "",
    peer: row.peer,
    outcome: row.outcome,
    message: row.message ?? "",
    details: row.details,
  };
}

function encodePageToken(id: number): string {
  return Buffer.from(`audit|${id}`).toString("base64url");
}

function decodePageToken(token: string): number {
  const [tag, id] = Buffer.from(token, "base64url").toString().split("|");
  const n = Number(id);
  if (tag !== "audit" || !id || !/^\d{1,18}$/.test(id) || !Number.isSafeInteger(n))
    throw invalid("page_token is not a token this server issued");
  return n;
}
