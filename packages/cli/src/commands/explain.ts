import { type ExplainRecordResponse, ExplainRecordResponseSchema, timestampDate } from "@drover/proto";
import { type CommandContext, need, one } from "../command-context.js";

/** The explanation, then the record's ledger entry and each note about it, a line each. */
function explanationLines(res: ExplainRecordResponse): string[] {
  const lines = [res.explanation];
  if (res.entry) {
    lines.push(
      `ledger: ${res.entry.action} ${res.entry.recordType} ${res.entry.recordId} (run ${res.entry.runId}, task ${res.entry.taskId}${
        res.entry.recordedAt ? `, at ${timestampDate(res.entry.recordedAt).toISOString()}` : ""
      })`,
    );
  }
  for (const n of res.notes)
    lines.push(
      `note: ${n.level} ${n.reason} (run ${n.runId}${n.taskId ? `, task ${n.taskId}` : ""}${
        n.createdAt ? `, at ${timestampDate(n.createdAt).toISOString()}` : ""
      })`,
    );
  return lines;
}

/** `drover explain`: what became of one source record, and why. */
export async function explain({ client, flags, positionals, print }: CommandContext): Promise<number> {
  const sourceId = one(positionals, "source id");
  const res = await client.explainRecord({
    tenantId: need(flags, "tenant"),
    source: (flags.source as string | undefined) ?? "crm",
    sourceAccount: need(flags, "account"),
    kind: need(flags, "kind"),
    sourceId,
  });
  print(explanationLines(res).join("\n"), ExplainRecordResponseSchema, res);
  return 0;
}
