import type { TaskRow } from "@drover/db";

/** Raw `returning *` rows come back snake_cased; map them to drizzle's row type. */
export function toTaskRow(r: Record<string, unknown>): TaskRow {
  const date = (v: unknown) =>
    v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v));
  return {
    id: Number(r.id),
    runId: String(r.run_id),
    kind: String(r.kind),
    phase: Number(r.phase),
    seedKey: String(r.seed_key),
    cursor: (r.cursor ?? {}) as Record<string, unknown>,
    processedOffset: Number(r.processed_offset),
    status: r.status as TaskRow["status"],
    attempts: Number(r.attempts),
    attemptsSinceProgress: Number(r.attempts_since_progress ?? 0),
    lockedBy: (r.locked_by as string | null) ?? null,
    lockedAt: date(r.locked_at),
    worker: (r.worker as string | null) ?? null,
    availableAt: date(r.available_at) ?? new Date(0),
    dispatchedAt: date(r.dispatched_at),
    stats: (r.stats ?? {}) as Record<string, number>,
    rowsRead: Number(r.rows_read ?? 0),
    rowsWritten: Number(r.rows_written ?? 0),
    listedIds: (r.listed_ids as string[] | null) ?? null,
    lastError: (r.last_error as string | null) ?? null,
    startedAt: date(r.started_at),
    finishedAt: date(r.finished_at),
    createdAt: date(r.created_at) ?? new Date(0),
    updatedAt: date(r.updated_at) ?? new Date(0),
  };
}
