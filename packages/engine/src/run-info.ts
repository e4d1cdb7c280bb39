import type { RunRow } from "@drover/db";
import type { RunInfo } from "@drover/provider-sdk";

export function toRunInfo(run: RunRow, withSecret = false): RunInfo {
  return {
    id: run.id,
    tenantId: run.tenantId,
    source: run.source,
    sourceAccount: run.sourceAccount,
    kinds: run.kinds,
    plan: run.plan,
    sourceConfig: run.sourceConfig,
    secret: withSecret ? (run.sourceSecret ?? undefined) : undefined,
    startedAt: run.startedAt,
  };
}
