import {
  type AuditEvent,
  ListAuditEventsResponseSchema,
  timestampDate,
  timestampFromDate,
} from "@drover/proto";
import { type CommandContext, pageLimit, UsageError } from "../command-context.js";
import { table } from "../render.js";

/** `--since`: an ISO time, or a span back from now (`90m`, `24h`, `7d`). */
function sinceDate(text: string): Date {
  const span = /^(\d+)([mhd])$/.exec(text);
  if (span) {
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[span[2] as "m" | "h" | "d"];
    return new Date(Date.now() - Number(span[1]) * unit);
  }
  const at = new Date(text);
  if (Number.isNaN(at.getTime()))
    throw new UsageError(
      `--since takes an ISO time (2026-12-01T00:00Z) or a span such as 24h or 7d, got "${text}"`,
    );
  return at;
}

/** One audit event as a row of the listing. */
function eventRow(e: AuditEvent): string[] {
  return [
    e.at ? timestampDate(e.at).toISOString().replace("T", " ").slice(0, 19) : "",
    e.actor,
    e.action,
    e.tenantId,
    e.runId,
    e.outcome === "ok" ? "ok" : `${e.outcome}: ${e.message}`,
    e.peer,
    Object.entries(e.details)
      .map(([k, v]) => `${k}=${v}`)
      .join(" "),
  ];
}

/** `drover audit`: who did what, newest first, for one run or by tenant, action and time. */
export async function audit({ client, flags, positionals, width, print }: CommandContext): Promise<number> {
  if (positionals.length > 1) throw new UsageError("expected at most one run id");
  const limit = pageLimit(flags, 50);
  const since = typeof flags.since === "string" ? sinceDate(flags.since) : undefined;
  const response = await client.listAuditEvents({
    runId: positionals[0] ?? "",
    tenantId: (flags.tenant as string | undefined) ?? "",
    action: (flags.action as string | undefined) ?? "",
    ...(since ? { since: timestampFromDate(since) } : {}),
    pageSize: limit,
  });
  const { events } = response;
  print(
    events.length === 0
      ? "no audit events"
      : table(["at", "who", "action", "tenant", "run", "outcome", "from", "details"], events.map(eventRow), {
          width,
        }),
    ListAuditEventsResponseSchema,
    response,
  );
  return 0;
}
