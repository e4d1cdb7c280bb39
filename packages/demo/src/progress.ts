import type { Run } from "@drover/proto";
import { RunStatus } from "@drover/proto";

const STATUS_NAMES: Record<number, string> = {
  [RunStatus.PENDING]: "pending",
  [RunStatus.RUNNING]: "running",
  [RunStatus.STOPPING]: "stopping",
  [RunStatus.STOPPED]: "stopped",
  [RunStatus.SUCCEEDED]: "succeeded",
  [RunStatus.FAILED]: "failed",
};

export function statusName(status: RunStatus): string {
  return STATUS_NAMES[status] ?? "unknown";
}

export function rowsDone(run: Run): number {
  return run.progress.reduce(
    (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
    0,
  );
}

function bar(done: number, total: number, width = 24): string {
  const ratio = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(ratio * width);
  return `${"█".repeat(filled)}${"░".repeat(width - filled)}`;
}

/** Live progress: a block of bars redrawn in place on a terminal, a line now and then elsewhere. */
export class ProgressView {
  private lines = 0;
  private lastPrint = 0;
  constructor(
    private readonly totals: Readonly<Record<string, number>>,
    private readonly tty = process.stdout.isTTY === true,
  ) {}

  update(run: Run, rowsPerSecond: number): void {
    const phase = run.phases[run.currentPhase];
    const header = `run ${run.id.slice(0, 8)} ${statusName(run.status)} · phase ${Math.min(run.currentPhase + 1, run.phases.length)}/${run.phases.length}${phase ? ` [${phase.kinds.join(", ")}]` : ""} · tasks ${run.tasks?.running ?? 0} running, ${run.tasks?.succeeded ?? 0} done · ${Math.round(rowsPerSecond)} rows/s`;
    if (!this.tty) {
      if (Date.now() - this.lastPrint < 2_000) return;
      this.lastPrint = Date.now();
      const kinds = run.progress.map(
        (p) =>
          `${p.kind} ${Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed)}/${this.totals[p.kind] ?? "?"}`,
      );
      process.stdout.write(`${header} · ${kinds.join(" ")}\n`);
      return;
    }
    const rows = run.progress.map((p) => {
      const done = Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed);
      const total = this.totals[p.kind] ?? done;
      return `  ${p.kind.padEnd(14)} ${bar(done, total)} ${String(done).padStart(7)}/${String(total).padEnd(7)}`;
    });
    const block = [header, ...rows];
    if (this.lines > 0) process.stdout.write(`\x1b[${this.lines}A`);
    process.stdout.write(block.map((l) => `\x1b[2K${l}\n`).join(""));
    this.lines = block.length;
  }
}

export function resultTable(run: Run): string {
  const head = ["kind", "imported", "already here", "skipped", "failed"];
  const rows = run.progress.map((p) => [
    p.kind,
    String(p.imported),
    String(p.matched + p.alreadyHere),
    String(p.skipped),
    String(p.failed),
  ]);
  const total = ["total", ...[1, 2, 3, 4].map((i) => String(rows.reduce((n, r) => n + Number(r[i]), 0)))];
  const all = [head, ...rows, total];
  const widths = head.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
  const fmt = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const rule = widths.map((w) => "─".repeat(w)).join("  ");
  return [fmt(head), rule, ...rows.map(fmt), rule, fmt(total)].join("\n");
}
