/**
 * Span attribute keys shared by every Drover service, so that dashboards and trace queries can rely on
 * one spelling. Values are namespaced under `drover.` to stay clear of OTel semantic conventions.
 */
export const Attr = {
  runId: "drover.run_id",
  taskId: "drover.task_id",
  kind: "drover.kind",
  phase: "drover.phase",
  attempt: "drover.attempt",
  tenantId: "drover.tenant_id",
} as const;

export type AttrKey = (typeof Attr)[keyof typeof Attr];
