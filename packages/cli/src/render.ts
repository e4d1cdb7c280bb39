import {
  type Run,
  RunStatus,
  runFacts,
  runStatusName,
  timestampDate,
  type Verification,
} from "@drover/proto";

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

/** Cells that are counts (or empty) read from the right, so their digits line up. */
const NUMERIC = /^(-?\d[\d,.]*%?)?$/;

/**
 * How many terminal columns a line takes: escape sequences and control characters take none, every
 * other code point one.
 */
export function visibleLength(line: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the escape sequences are what is removed
  return [...line.replace(/\x1b\[[0-9;]*[A-Za-z]|[\x00-\x1f]/g, "")].length;
}

/** The line cut to `width` columns, ending in "…" when something was cut. */
export function fit(line: string, width: number | undefined): string {
  if (width === undefined) return line;
  const chars = [...line];
  if (chars.length <= width) return line;
  return width <= 1 ? chars.slice(0, width).join("") : `${chars.slice(0, width - 1).join("")}…`;
}

/**
 * A plain table: columns of counts right-aligned, text left-aligned. Given a `width` (the
 * terminal's), the widest text columns give way (cut with "…", never below their heading or 8
 * characters) until each line fits; counts are never cut. Without one (output to a file or a
 * pipe) nothing is cut.
 */
export function table(head: string[], rows: string[][], options: { width?: number } = {}): string {
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((r) => [...(r[i] ?? "")].length)));
  const numeric = head.map((_, i) => rows.length > 0 && rows.every((r) => NUMERIC.test(r[i] ?? "")));
  if (options.width !== undefined) {
    const floor = head.map((h, i) => (numeric[i] ? widths[i]! : Math.min(widths[i]!, Math.max(8, h.length))));
    let excess = widths.reduce((a, b) => a + b, 0) + 2 * (head.length - 1) - options.width;
    while (excess > 0) {
      let widest = -1;
      for (let i = 0; i < widths.length; i++)
        if (widths[i]! > floor[i]! && (widest < 0 || widths[i]! > widths[widest]!)) widest = i;
      if (widest < 0) break;
      widths[widest]!--;
      excess--;
    }
  }
  const cell = (c: string, i: number) => {
    const text = fit(c, widths[i]);
    const pad = " ".repeat(Math.max(0, widths[i]! - [...text].length));
    return numeric[i] ? pad + text : text + pad;
  };
  const fmt = (r: string[]) =>
    head
      .map((_, i) => cell(r[i] ?? "", i))
      .join("  ")
      .trimEnd();
  return [fmt(head), widths.map((w) => "─".repeat(w)).join("  "), ...rows.map(fmt)].join("\n");
}

/**
 * What each count of a kind means, for the tables and the live view. Matched and already here are
 * different facts about the product: one was there before Drover, the other came from Drover.
 */
export const COUNTS_LEGEND = [
  "imported: created by this run",
  "matched: the product already had an equivalent record (e.g. same email), which was reused, whoever put it there",
  "already here: an earlier run (or an earlier attempt of this one) had imported it",
  "skipped: kept as a placeholder, with a reason; failed: not imported, with a reason (drover notes RUN_ID)",
];

/** The per-kind outcome table operators read at the end of a run, optionally with a total row. */
export function countsTable(run: Run, options: { total?: boolean; width?: number } = {}): string {
  const rows = run.progress.map((p) => [
    p.kind,
    String(p.imported),
    String(p.matched),
    String(p.alreadyHere),
    String(p.skipped),
    String(p.failed),
  ]);
  const head = ["kind", "imported", "matched", "already here", "skipped", "failed"];
  if (!options.total) return table(head, rows, options);
  const total = ["total", ...[1, 2, 3, 4, 5].map((i) => String(rows.reduce((n, r) => n + Number(r[i]), 0)))];
  const lines = table(head, [...rows, total], options).split("\n");
  return [...lines.slice(0, -1), lines[1]!, lines[lines.length - 1]!].join("\n");
}

/**
 * While the run's source account is walled off (a 429's reset, a spent daily allowance): what the
 * run waits for and until when, in local time (`timeZone`, else the process's), and how long that
 * is from `now`. Undefined when there is no wall ahead or the run no longer goes.
 */
export function budgetWaitLine(run: Run, now: number, timeZone?: string): string | undefined {
  const b = run.budget;
  if (!b || isTerminal(run.status)) return undefined;
  if (b.dailySpent && b.dailyResetAt) {
    // The day's allowance is spent: said in the account's own day (its reset's time zone), which is
    // what its operator knows the reset by.
    const at = timestampDate(b.dailyResetAt).getTime();
    if (at > now) {
      const zone = b.dailyResetTimeZone || timeZone;
      // A day's reset is its next midnight: the date is said only when it is further than a day off.
      const clock = at - now < 86_400_000 ? localTime(at, at, zone) : localTime(at, now, zone);
      const when = `${clock}${b.dailyResetTimeZone ? ` ${b.dailyResetTimeZone}` : ""}`;
      return `waiting for the daily budget of ${run.sourceAccount} until ${when} (in ${formatWait((at - now) / 1000)})`;
    }
  }
  const until = b.blockedUntil;
  if (!until) return undefined;
  const at = timestampDate(until).getTime();
  if (at <= now) return undefined;
  return `waiting for the source's budget (${run.sourceAccount}) until ${localTime(at, now, timeZone)} (in ${formatWait((at - now) / 1000)})`;
}

/** The time of day, with the date in front when it is not today's. */
function localTime(at: number, now: number, timeZone?: string): string {
  const zone = timeZone ? { timeZone } : {};
  const day = new Intl.DateTimeFormat("en-CA", {
    ...zone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
  });
  const time = new Intl.DateTimeFormat("en-GB", {
    ...zone,
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  });
  return day.format(at) === day.format(now) ? time.format(at) : `${day.format(at)} ${time.format(at)}`;
}

/** A wait as a person says it: "45 s", "12 m", "3 h 12 m", "2 d 5 h". */
export function formatWait(seconds: number): string {
  const s = Math.max(1, Math.ceil(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} m` : `${h} h`;
  return h % 24 ? `${Math.floor(h / 24)} d ${h % 24} h` : `${Math.floor(h / 24)} d`;
}

/**
 * The run's ETA against its source account's budget (GetRun's eta): when it should end, and what
 * it still needs, e.g. `ETA: about 2 days 5 hours (budget: 91,200 requests, 182,400 tokens, 2 daily resets)`.
 */
export function etaLine(eta: NonNullable<Run["eta"]>): string {
  const resets =
    eta.dailyResets > 0 ? `, ${eta.dailyResets} daily reset${eta.dailyResets === 1 ? "" : "s"}` : "";
  const n = (v: bigint) => Number(v).toLocaleString("en-US");
  return `ETA: ${eta.text} (budget: ${n(eta.requestsLeft)} requests, ${n(eta.tokensLeft)} tokens${resets})`;
}

/**
 * A dry run's report (GetRun's dry_run_report) as `status` prints it: per kind what a real run
 * would do, the reasons it would skip or fail rows (grouped as `notes` groups them, with sample
 * ids), and what it would cost, e.g. `a real run would cost 1,204 requests, 24,080 tokens: about 3 hours 5 minutes`.
 */
export function dryRunSummary(run: Run, options: { width?: number } = {}): string[] {
  const report = run.dryRunReport;
  if (!report) return [];
  const n = (v: bigint) => Number(v).toLocaleString("en-US");
  const matchedBy = (k: (typeof report.kinds)[number]) =>
    [
      ...Object.entries(k.matchedBy).map(([rule, c]) => `${rule} ${n(c)}`),
      ...(k.alreadyHere > 0n ? [`ledger ${n(k.alreadyHere)}`] : []),
    ].join(", ");
  const resets =
    report.dailyResets > 0 ? `, ${report.dailyResets} daily reset${report.dailyResets === 1 ? "" : "s"}` : "";
  const missing = (k: (typeof report.kinds)[number]) =>
    Object.keys(k.missingParents).length === 0
      ? []
      : [
          `  ${k.kind} would skip for missing parents: ${Object.entries(k.missingParents)
            .map(([parent, c]) => `${parent === "none" ? "no parent given" : parent} ${n(c)}`)
            .join(", ")}`,
        ];
  const reasons = report.kinds.flatMap((k) => [
    ...missing(k),
    ...k.reasons.map(
      (r) =>
        `  ${k.kind} ${r.level === "error" ? "would fail" : "would skip"} ${n(r.count)}: ${r.reason}${r.sampleSubjectIds.length > 0 ? ` (e.g. ${r.sampleSubjectIds.join(", ")})` : ""}`,
    ),
  ]);
  return [
    "",
    "dry run: nothing was written; a real run would",
    table(
      ["kind", "create", "match", "matched by", "skip", "fail", "requests", "tokens"],
      report.kinds.map((k) => [
        k.kind,
        n(k.wouldCreate),
        n(k.wouldMatch),
        matchedBy(k),
        n(k.wouldSkip),
        n(k.wouldFail),
        n(k.requests),
        n(k.tokens),
      ]),
      options,
    ),
    ...(reasons.length > 0 ? ["reasons:", ...reasons] : []),
    `a real run would cost ${n(report.requests)} requests, ${n(report.tokens)} tokens: ${report.durationText} at the account's budget${resets}`,
    ...(report.dailyTokens > 0n
      ? [
          `that is ${report.budgetDays.toFixed(2)} day(s) of a daily budget of ${n(report.dailyTokens)} tokens, ${Math.max(1, Math.ceil(report.budgetDays))} calendar day(s) if nothing else spends it`,
        ]
      : []),
  ];
}

export function runSummary(run: Run, options: { width?: number; now?: number } = {}): string {
  const t = run.tasks;
  const waiting = budgetWaitLine(run, options.now ?? Date.now());
  return [
    `${run.dryRun ? "dry run" : "run"} ${run.id}  ${statusName(run.status)}  tenant ${run.tenantId}  ${run.source}:${run.sourceAccount}`,
    `${phaseLabel(run)}  tasks: ${t?.running ?? 0} running, ${t?.pending ?? 0} pending, ${t?.succeeded ?? 0} done, ${t?.failed ?? 0} failed, ${t?.cancelled ?? 0} cancelled`,
    ...(waiting ? [waiting] : []),
    ...(run.eta && !isTerminal(run.status) ? [etaLine(run.eta)] : []),
    ...(Object.keys(run.facts).length > 0 ? [`learned: ${factsLine(run)}`] : []),
    ...(run.error ? [`error: ${run.error}`] : []),
    ...followLines(run),
    ...revertLines(run),
    "",
    // A revert run imports nothing: its table is what it removed.
    run.revert?.reverts ? revertTable(run, options) : countsTable(run, options),
    ...verificationSummary(run, options),
    ...dryRunSummary(run, options),
  ].join("\n");
}

/**
 * A revert run's per-kind account, in the order it goes (children first): records removed, already
 * gone from the product, left in place (`drover notes` says why), of those the reverted run created.
 */
export function revertTable(run: Run, options: { width?: number } = {}): string {
  const kinds = run.revert?.kinds ?? [];
  return table(
    ["kind", "removed", "already gone", "could not remove", "created by the run"],
    kinds.map((k) => [k.kind, String(k.removed), String(k.gone), String(k.kept), String(k.total)]),
    options,
  );
}

/** A revert run says what it reverts and how far it got; a reverted run says by which run. */
function revertLines(run: Run): string[] {
  const r = run.revert;
  if (!r) return [];
  if (r.reverts)
    return [
      `revert of run ${r.reverts}${r.force ? " (forced)" : ""}: ${r.removed} records removed, ${r.kept} left in place (see its notes)`,
    ];
  return r.revertedBy ? [`reverted by run ${r.revertedBy}`] : [];
}

/**
 * A follow run: its replication lag (now minus the start of the last finished pass), whether it was
 * cut over, and the changes each pass applied, the latest few.
 */
export function followLines(run: Run): string[] {
  const f = run.follow;
  if (!f) return [];
  const lag = f.replicationLagSeconds === undefined ? "no pass finished yet" : `${f.replicationLagSeconds}s`;
  const cut = f.cutoverAt
    ? `cutover asked ${timestampDate(f.cutoverAt).toISOString()}`
    : "until cutover (drover complete RUN_ID)";
  const passes = f.passes.slice(-5).map((p) => {
    const since = p.since ? timestampDate(p.since).toISOString() : "?";
    const state = p.finishedAt
      ? `${p.changes} change(s)${p.deletions > 0n ? `, ${p.deletions} of them deleted at the source` : ""}`
      : p.startsAt && timestampDate(p.startsAt).getTime() > Date.now()
        ? `due ${timestampDate(p.startsAt).toISOString()}`
        : "running";
    return `  pass ${p.index} (since ${since}): ${state}`;
  });
  const feed =
    f.feed === "webhooks"
      ? [
          `feed: webhooks, reconcile every ${Math.max(f.intervalSeconds, f.reconcileSeconds)}s; last event ${
            f.lastEventAt
              ? `${Math.max(0, Math.round((Date.now() - timestampDate(f.lastEventAt).getTime()) / 1000))}s ago`
              : "none yet"
          }`,
        ]
      : f.feed === "polling"
        ? [`feed: polling every ${f.intervalSeconds}s (${f.feedReason})`]
        : [];
  return [`follow: every ${f.intervalSeconds}s, ${cut}; replication lag ${lag}`, ...feed, ...passes];
}

/**
 * The run's verification as `status` shows it: the result and its table once there is one; for a
 * finished run without one yet, that it is coming (never for a dry run or a revert, which are not
 * verified); nothing while the run goes.
 */
export function verificationSummary(run: Run, options: { width?: number } = {}): string[] {
  const v = run.verification;
  if (!v) {
    // Neither wrote what verification compares: a dry run wrote nothing, a revert removed rows.
    if (run.dryRun) return ["", "verification: none (a dry run writes nothing to verify)"];
    if (run.revert?.reverts) return ["", "verification: none (a revert run is not verified)"];
    if (run.status === RunStatus.STOPPED)
      return ["", "verification: none (a stopped run is verified on demand: drover verify RUN_ID)"];
    return isTerminal(run.status)
      ? ["", "verification: not done yet (a worker does it shortly; drover verify RUN_ID waits for it)"]
      : [];
  }
  const at = v.verifiedAt ? ` (${timestampDate(v.verifiedAt).toISOString()})` : "";
  return [
    "",
    `verification: ${v.ok ? "passed" : v.error ? `could not finish: ${v.error}` : "found problems"}${at}`,
    ...(v.kinds.length > 0 ? [verificationTable(v, "ledger", options)] : []),
  ];
}

/** What the run decided about its source once for all its tasks, e.g. `pg-table.copy in-database`. */
export function factsLine(run: Run): string {
  return runFacts(run)
    .map((f) => `${f.key} ${f.value}`)
    .join("; ");
}

/**
 * When each kind began to move, so its rows/s is measured over its own time rather than the run's
 * (organizations finish before deals start), and when it was done, so a finished kind's rate stays
 * what it was instead of decaying while the rest of the run goes on. One per `watch`.
 */
export class KindClock {
  private readonly since = new Map<string, number>();
  /** Kinds seen done: when, and the seconds they had been going then. */
  private readonly frozen = new Map<string, { at: number; seconds: number }>();
  constructor(readonly now: () => number = Date.now) {}

  /**
   * Seconds the kind has been going (or went, once `over`); undefined while it has no task yet. A
   * kind that was over and moves again (a later pass gave it tasks) is timed on from where it was.
   */
  activeSeconds(p: Run["progress"][number], fallbackSeconds: number, over = false): number | undefined {
    if (p.tasksTotal === 0n && kindDone(p) === 0) return undefined;
    const now = this.now();
    if (!this.since.has(p.kind)) this.since.set(p.kind, now);
    const frozen = this.frozen.get(p.kind);
    if (frozen && over) return frozen.seconds;
    if (frozen) {
      // The pause does not count as time the kind was going.
      this.since.set(p.kind, this.since.get(p.kind)! + now - frozen.at);
      this.frozen.delete(p.kind);
    }
    // A watch that starts mid-run saw the kind begin later than it did: the run's time is closer.
    const measured = (now - this.since.get(p.kind)!) / 1000;
    const seconds = measured < 1 ? Math.max(0.001, fallbackSeconds) : measured;
    if (over) this.frozen.set(p.kind, { at: now, seconds });
    return seconds;
  }
}

/** A kind with no task left to run: its phase is behind the run, or every task it has is finished. */
function kindOver(run: Run, p: Run["progress"][number], phase: number): boolean {
  if (phase < run.currentPhase || isTerminal(run.status)) return true;
  return phase === run.currentPhase && p.tasksTotal > 0n && p.tasksDone === p.tasksTotal;
}

/** One kind's outcome counts as the live view spells them. */
export function countsLine(p: Run["progress"][number]): string {
  return `imported ${p.imported}, matched ${p.matched}, already here ${p.alreadyHere}, skipped ${p.skipped}, failed ${p.failed}`;
}

/**
 * Progress of a live run. The source does not say how many rows it holds, so a kind's bar is its
 * tasks done of the tasks known (page-walking kinds seed their next page as they go, so it is rough
 * early), its rate is rows over the time it has been going, and its ETA is that time × tasks left ÷
 * tasks done. The run's ETA is GetRun's (the work left against the account's budget) where the
 * source estimates it; otherwise it counts phases not begun as one more of what is left.
 *
 * Given a `width` (the terminal's), no line is wider: a kind's counts move to a line of their own,
 * then its tasks, rate and bar are left out, narrowest terminal last, and what still does not fit
 * is cut. Each line then takes exactly one row of the terminal, so a redraw knows how far to go up.
 */
export function progressBlock(
  run: Run,
  elapsedMs: number,
  clock: KindClock = new KindClock(),
  width?: number,
): string[] {
  if (run.revert?.reverts) return revertProgress(run, width);
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
  // The budget-aware ETA (GetRun's) where the source gives one; else the tasks' own pace.
  const etaText =
    run.eta && !isTerminal(run.status)
      ? ` · ETA ${run.eta.text}`
      : eta === undefined
        ? ""
        : ` · ETA ~${formatDuration(eta)}`;
  const header = `${statusName(run.status)} · ${phaseLabel(run)} · ${done} rows · ${rate.toFixed(0)} rows/s${etaText}`;
  const phaseOf = new Map(run.phases.flatMap((p, i) => p.kinds.map((k) => [k, i] as const)));
  const lines = [fit(header, width)];
  const waiting = budgetWaitLine(run, clock.now());
  if (waiting) lines.push(fit(waiting, width));
  for (const p of run.progress) {
    const phase = phaseOf.get(p.kind) ?? 0;
    const rows = kindDone(p);
    const over = kindOver(run, p, phase);
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
    const cells = {
      name: `  ${p.kind.padEnd(14)}`,
      bar: bar(ratio),
      tasks: `${String(tasksDone).padStart(5)}/${String(total).padEnd(5)} tasks`,
      rows: `${String(rows).padStart(8)} rows`,
      rate: `${kindRate.toFixed(0).padStart(5)} rows/s`,
      state: state.padEnd(10),
    };
    const counts = countsLine(p);
    const line = (keys: (keyof typeof cells)[]) =>
      keys
        .map((k) => cells[k])
        .join("  ")
        .trimEnd();
    const full = `${line(["name", "bar", "tasks", "rows", "rate", "state"])}  ${counts}`;
    if (width === undefined || visibleLength(full) <= width) {
      lines.push(full);
      continue;
    }
    // Narrower terminals: the counts go below, then columns go, least telling first.
    const layouts: (keyof typeof cells)[][] = [
      ["name", "bar", "tasks", "rows", "rate", "state"],
      ["name", "bar", "rows", "rate", "state"],
      ["name", "bar", "rows", "state"],
      ["name", "rows", "state"],
    ];
    const chosen = layouts.map(line).find((l) => visibleLength(l) <= width) ?? line(layouts.at(-1)!);
    lines.push(fit(chosen, width), fit(`      ${counts}`, width));
  }
  return lines;
}

/**
 * A revert run live: per kind (children first) how much of what the reverted run created is
 * dealt with (removed, already gone, or left in place with a note), as a bar and counts.
 */
function revertProgress(run: Run, width?: number): string[] {
  const r = run.revert!;
  const dealt = (k: (typeof r.kinds)[number]) => Number(k.removed + k.gone + k.kept);
  const total = r.kinds.reduce((n, k) => n + Number(k.total), 0);
  const done = r.kinds.reduce((n, k) => n + dealt(k), 0);
  const lines = [
    fit(
      `${statusName(run.status)} · revert of run ${r.reverts}${r.force ? " (forced)" : ""} · ${done}/${total} records · ${r.removed} removed, ${r.kept} could not be removed`,
      width,
    ),
  ];
  for (const k of r.kinds) {
    const ratio = k.total > 0n ? dealt(k) / Number(k.total) : isTerminal(run.status) ? 1 : 0;
    lines.push(
      fit(
        `  ${k.kind.padEnd(14)}  ${bar(ratio)}  removed ${k.removed}, already gone ${k.gone}, could not remove ${k.kept} of ${k.total}`,
        width,
      ),
    );
  }
  return lines;
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/**
 * A verification as a table, one row per kind, then its mismatches: every one, or at most
 * `mismatchesPerKind` per kind with a line saying how many more there are. `accountedAs` names
 * what the source was counted against: the ledger, or for a ledgerless source its destination table.
 */
export function verificationTable(
  v: Verification,
  accountedAs = "ledger",
  options: { width?: number; mismatchesPerKind?: number } = {},
): string {
  const shown = options.mismatchesPerKind ?? Number.POSITIVE_INFINITY;
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
      options,
    ),
    ...v.kinds.flatMap((k) => [
      ...k.mismatches.slice(0, shown).map((m) => `  ${k.kind}: ${m}`),
      ...(k.mismatches.length > shown
        ? [`  and ${k.mismatches.length - shown} more ${k.kind} mismatches`]
        : []),
    ]),
  ].join("\n");
}
