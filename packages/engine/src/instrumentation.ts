import type { WriteSummary } from "@drover/provider-sdk";
import { Attr, metrics, withSpan } from "@drover/telemetry";

/**
 * What the engine tells operators about its windows: a span per page and per window (under the
 * task's span, so a slow page leads to its windows), how long a window's transaction took, and what
 * became of its rows. Kept here so the window writer and the task runner each make one call.
 */
const windowSeconds = metrics.histogram(
  "drover_window_duration_seconds",
  "Time to write one window of rows through the ledger, transaction and checkpoint included",
  ["kind"],
  [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
);
const rowsByOutcome = metrics.counter(
  "drover_rows_total",
  "Source rows written, by what became of them (created, matched, already_here, skipped, failed)",
  ["kind", "outcome"],
);

const OUTCOMES = ["created", "matched", "alreadyHere", "skipped", "failed"] as const;
const OUTCOME_LABEL: Record<(typeof OUTCOMES)[number], string> = {
  created: "created",
  matched: "matched",
  alreadyHere: "already_here",
  skipped: "skipped",
  failed: "failed",
};

/**
 * Runs one window's transaction in a span and, once it committed, counts its rows. `summary` is
 * the window's own, filled in by `commit`; a window that rolled back counts nothing.
 */
export async function traceWindow<T>(
  kind: string,
  rows: number,
  summary: WriteSummary,
  commit: () => Promise<T>,
): Promise<T> {
  const started = performance.now();
  const result = await withSpan("window", { "drover.rows": rows }, async (span) => {
    const out = await commit();
    span.setAttributes({
      "drover.created": summary.created,
      "drover.matched": summary.matched,
      "drover.already_here": summary.alreadyHere,
      "drover.skipped": summary.skipped,
      "drover.failed": summary.failed,
    });
    return out;
  });
  windowSeconds.observe({ kind }, (performance.now() - started) / 1000);
  for (const outcome of OUTCOMES) {
    if (summary[outcome] > 0) rowsByOutcome.inc({ kind, outcome: OUTCOME_LABEL[outcome] }, summary[outcome]);
  }
  return result;
}

/** One page of rows handed to the engine by a provider: the span its windows hang under. */
export function tracePage<T>(kind: string, rows: number, write: () => Promise<T>): Promise<T> {
  return withSpan("page", { [Attr.kind]: kind, "drover.rows": rows }, write);
}
