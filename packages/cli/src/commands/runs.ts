import { ListRunsResponseSchema, RUN_STATUSES, type Run, runStatusFromName } from "@drover/proto";
import { type CommandContext, type Flags, pageLimit, UsageError } from "../command-context.js";
import { statusName, table } from "../render.js";

/** `--status running,failed,...`: the statuses to list, each checked against the known names. */
function statusesFlag(flags: Flags): string[] {
  const statuses = typeof flags.status === "string" ? flags.status.split(",").filter(Boolean) : [];
  const unknown = statuses.filter((s) => runStatusFromName(s) === undefined);
  if (unknown.length > 0)
    throw new UsageError(`unknown status ${unknown.join(", ")}; use ${RUN_STATUSES.join(", ")}`);
  return statuses;
}

/** One run as a row of the listing. */
function runRow(r: Run): string[] {
  return [
    r.id,
    r.tenantId,
    `${r.source}:${r.sourceAccount}`,
    statusName(r.status),
    `${Math.min(r.currentPhase + 1, r.phases.length)}/${r.phases.length}`,
    String(
      r.progress.reduce((n, p) => n + p.imported + p.matched + p.alreadyHere + p.skipped + p.failed, 0n),
    ),
    r.createdAt
      ? new Date(Number(r.createdAt.seconds) * 1000).toISOString().replace("T", " ").slice(0, 19)
      : "",
  ];
}

/** `drover runs`: the runs, newest first, of a tenant or of all, in some statuses or all. */
export async function runs({ client, flags, width, print }: CommandContext): Promise<number> {
  const statuses = statusesFlag(flags);
  const limit = pageLimit(flags, 20);
  const response = await client.listRuns({
    tenantId: (flags.tenant as string | undefined) ?? "",
    statuses: statuses.map((s) => runStatusFromName(s)!),
    pageSize: limit,
  });
  const { runs } = response;
  print(
    runs.length === 0
      ? "no runs"
      : table(["run", "tenant", "source", "status", "phase", "rows", "created"], runs.map(runRow), {
          width,
        }),
    ListRunsResponseSchema,
    response,
  );
  return 0;
}
