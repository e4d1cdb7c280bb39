import { type Run, RunStatus, runFacts, runStatusName, type Verification } from "@drover/proto";

export const statusName = runStatusName;

export function isTerminal(status: RunStatus): boolean {
  return status === RunStatus.STOPPED || status === RunStatus.SUCCEEDED || status === RunStatus.FAILED;
}

export function kindDone(p: Run["progress"][number]): number {
  return Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed);
}

export function rowsDone(run: Run): number {
  return run.progress.reduce((n, p) => n + kindDone(p), 0);
}

export function phaseLabel(run: Run): string {
  const phase = run.phases[run.currentPhase];
  const n = Math.min(run.currentPhase + 1, run.phases.length);
  return `phase ${n}/${run.phases.length}${phase ? ` [${phase.kinds.join(", ")}]` : ""}`;
}

function bar(ratio: number, width = 20): string {
  const filled = Math.round(Math.max(0, Math.min(1, ratio)) * width);
  return `${"█".repeat(filled)}${"░".repeat(width - filled)}`;
}

/** A plain table: first column left-aligned, the rest right-aligned. */
export function table(head: string[], rows: string[][]): string {
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [fmt(head), widths.map((w) => "─".repeat(w)).join("  "), ...rows.map(fmt)].join("\n");
}

/** The per-kind outcome table operators read at the end of a run, optionally with a total row. */
export function countsTable(run: Run, options: { total?: boolean } = {}): string {
  const rows = run.progress.map((p) => [
    p.kind,
    String(p.imported),
    String(p.matched + p.alreadyHere),
    String(p.skipped),
    String(p.failed),
  ]);
  const head = ["kind", "imported", "already here", "skipped", "failed"];
  if (!options.total) return table(head, rows);
  const total = ["total", ...[1, 2, 3, 4].map((i) => String(rows.reduce((n, r) => n + Number(r[i]), 0)))];
  const lines = table(head, [...rows, total]).split("\n");
  return [...lines.slice(0, -1), lines[1]!, lines[lines.length - 1]!].join("\n");
}

export function runSummary(run: Run): string {
  const t = run.tasks;
  return [
    `run ${run.id}  ${statusName(run.status)}  tenant ${run.tenantId}  ${run.source}:${run.sourceAccount}`,
    `${phaseLabel(run)}  tasks: ${t?.running ?? 0} running, ${t?.pending ?? 0} pending, ${t?.succeeded ?? 0} done, ${t?.failed ?? 0} failed, ${t?.cancelled ?? 0} cancelled`,
    ...(Object.keys(run.facts).length > 0 ? [`learned: ${factsLine(run)}`] : []),
    ...(run.error ? [`error: ${run.error}`] : []),
    "",
    countsTable(run),
  ].join("\n");
}

/** What the run decided about its source once for all its tasks, e.g. `pg-table.copy in-database`. */
export function factsLine(run: Run): string {
  return runFacts(run)
    .map((f) => `${f.key} ${f.value}`)
    .join("; ");
}

/**
 * When each kind began to move, so its rows/s is measured over its own time rather than the run's
 * (organizations finish before deals start). One per `watch`.
 */
export class KindClock {
  private readonly since = new Map<string, number>();
  private readonly until = new Map<string, number>();
  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Seconds the kind has been going (or went, once `over`: its rate then stays what it was);
   * undefined while it has no task yet.
   */
  activeSeconds(p: Run["progress"][number], fallbackSeconds: number, over = false): number | undefined {
    if (p.tasksTotal === 0n && kindDone(p) === 0) return undefined;
    if (!this.since.has(p.kind)) this.since.set(p.kind, this.now());
    if (over && !this.until.has(p.kind)) this.until.set(p.kind, this.now());
    // A watch that starts mid-run saw the kind begin later than it did: the run's time is closer.
    const seconds = ((this.until.get(p.kind) ?? this.now()) - this.since.get(p.kind)!) / 1000;
    return seconds < 1 ? Math.max(0.001, fallbackSeconds) : seconds;
  }
}

/**
 * Progress of a live run. The source does not say how many rows it holds, so a kind's bar is its
 * tasks done of the tasks known (page-walking kinds seed their next page as they go, so it is rough
 * early), its rate is rows over the time it has been going, and its ETA is that time × tasks left ÷
 * tasks done. The run's ETA counts phases not begun as one more of what is left.
 */
export function progressBlock(run: Run, elapsedMs: number, clock: KindClock = new KindClock()): string[] {
  const done = rowsDone(run);
  const seconds = Math.max(0.001, elapsedMs / 1000);
  const rate = done / seconds;
  const t = run.tasks;
  const finished = Number((t?.succeeded ?? 0n) + (t?.failed ?? 0n) + (t?.cancelled ?? 0n));
  const left = Number((t?.pending ?? 0n) + (t?.running ?? 0n));
  const phasesLeft = Math.max(0, run.phases.length - run.currentPhase - 1);
  const eta =
    isTerminal(run.status) || finished === 0
      ? undefined
      : (seconds * (left + phasesLeft * Math.max(1, left))) / Math.max(1, finished);
  const header = `${statusName(run.status)} · ${phaseLabel(run)} · ${done} rows · ${rate.toFixed(0)} rows/s${
    eta === undefined ? "" : ` · ETA ~${formatDuration(eta)}`
  }`;
  const phaseOf = new Map(run.phases.flatMap((p, i) => p.kinds.map((k) => [k, i] as const)));
  const rows = run.progress.map((p) => {
    const phase = phaseOf.get(p.kind) ?? 0;
    const rows = kindDone(p);
    const over = phase < run.currentPhase || isTerminal(run.status);
    const total = Number(p.tasksTotal);
    const tasksDone = Number(p.tasksDone);
    const active = clock.activeSeconds(p, seconds, over);
    let ratio: number;
    let state: string;
    if (over) {
      ratio = 1;
      state = "done";
    } else if (phase > run.currentPhase || active === undefined) {
      ratio = 0;
      state = "waiting";
    } else {
      ratio = total > 0 ? tasksDone / total : 0;
      const kindEta = tasksDone > 0 ? (active * (total - tasksDone)) / tasksDone : undefined;
      state = kindEta === undefined ? "ETA ?" : `ETA ~${formatDuration(kindEta)}`;
    }
    const kindRate = active === undefined ? 0 : rows / active;
    return [
      `  ${p.kind.padEnd(14)} ${bar(ratio)}`,
      `${String(tasksDone).padStart(5)}/${String(total).padEnd(5)} tasks`,
      `${String(rows).padStart(8)} rows`,
      `${kindRate.toFixed(0).padStart(5)} rows/s`,
      state.padEnd(10),
      `imported ${p.imported}, already here ${p.matched + p.alreadyHere}, skipped ${p.skipped}, failed ${p.failed}`,
    ].join("  ");
  });
  return [header, ...rows];
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/**
 * A verification as a table, one row per kind, then every mismatch. `accountedAs` names what the
 * source was counted against: the ledger, or for a ledgerless source its destination table.
 */
export function verificationTable(v: Verification, accountedAs = "ledger"): string {
  return [
    table(
      ["kind", "source", accountedAs, "failed", "sampled", "mismatches"],
      v.kinds.map((k) => [
        k.kind,
        String(k.sourceCount),
        String(k.ledgerCount),
        String(k.failedCount),
        String(k.sampled),
        String(k.mismatches.length),
      ]),
    ),
    ...v.kinds.flatMap((k) => k.mismatches.map((m) => `  ${k.kind}: ${m}`)),
  ].join("\n");
}
