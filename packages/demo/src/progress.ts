import { countsTable, fit, kindDone, phaseLabel, rowsDone, statusName } from "@drover/cli";
import type { Client, Run, RunService } from "@drover/proto";

function bar(done: number, total: number, width = 24): string {
  const ratio = total > 0 ? Math.min(1, done / total) : 1;
  const filled = Math.round(ratio * width);
  return `${"█".repeat(filled)}${"░".repeat(width - filled)}`;
}

/**
 * Live progress for the demo, which knows the sandbox's true totals: a block of bars redrawn in
 * place on a terminal, a line now and then elsewhere.
 */
export class ProgressView {
  private lines = 0;
  private lastPrint = 0;
  constructor(
    private readonly totals: Readonly<Record<string, number>>,
    private readonly tty = process.stdout.isTTY === true,
  ) {}

  update(run: Run, rowsPerSecond: number): void {
    const header = `run ${run.id.slice(0, 8)} ${statusName(run.status)} · ${phaseLabel(run)} · tasks ${run.tasks?.running ?? 0} running, ${run.tasks?.succeeded ?? 0} done · ${Math.round(rowsPerSecond)} rows/s`;
    if (!this.tty) {
      if (Date.now() - this.lastPrint < 2_000) return;
      this.lastPrint = Date.now();
      const kinds = run.progress.map((p) => `${p.kind} ${kindDone(p)}/${this.totals[p.kind] ?? "?"}`);
      process.stdout.write(`${header} · ${kinds.join(" ")}\n`);
      return;
    }
    const rows = run.progress.map((p) => {
      const done = kindDone(p);
      const total = this.totals[p.kind] ?? done;
      return `  ${p.kind.padEnd(14)} ${bar(done, total)} ${String(done).padStart(7)}/${String(total).padEnd(7)}`;
    });
    // Cut to the terminal's width, so each line takes one row and going up `lines` rows reaches
    // the block's top; then clear below, so nothing of a longer frame stays.
    const block = [header, ...rows].map((l) => fit(l, process.stdout.columns || undefined));
    if (this.lines > 0) process.stdout.write(`\x1b[${this.lines}A\r\x1b[J`);
    process.stdout.write(block.map((l) => `${l}\n`).join(""));
    this.lines = block.length;
  }
}

/**
 * Follows a run to its end on a ProgressView (rows/s over the time since `startedMs`), then prints
 * how it ended, its rate and its per-kind counts. Returns the run as it ended.
 */
export async function followRun(
  client: Client<typeof RunService>,
  run: Run,
  view: ProgressView,
  startedMs: number,
): Promise<Run> {
  let last = run;
  for await (const update of client.watchRun({ runId: run.id })) {
    last = update.run!;
    view.update(last, rowsDone(last) / Math.max(0.001, (Date.now() - startedMs) / 1000));
  }
  const seconds = (Date.now() - startedMs) / 1000;
  const done = rowsDone(last);
  process.stdout.write(
    `\nRun ${last.id} ${statusName(last.status)} in ${seconds.toFixed(1)} s: ${done} rows, ${Math.round(done / seconds)} rows/s\n\n`,
  );
  process.stdout.write(`${countsTable(last, { total: true })}\n\n`);
  if (last.error) process.stdout.write(`run error: ${last.error}\n`);
  return last;
}
