import {
  type AuditEvent,
  type GetThroughputResponse,
  type NoteGroup,
  type Run,
  RunStatus,
  runFacts,
  runStatusName,
  timestampDate,
} from "@drover/proto";

type Timestamp = NonNullable<Run["createdAt"]>;

/**
 * What the page draws, in plain JSON: numbers rather than int64 strings, status names rather than
 * enum values, matched (an equivalent record was already in the product) apart from already here
 * (an earlier run imported it), the budget as labelled facts that apply to the run as it is, and
 * which steering buttons the run's status allows.
 */
export interface RunJson {
  id: string;
  tenantId: string;
  source: string;
  sourceAccount: string;
  status: string;
  phases: string[][];
  /** 0-based; equals phases.length once every phase is done. */
  currentPhase: number;
  progress: {
    kind: string;
    imported: number;
    matched: number;
    alreadyHere: number;
    skipped: number;
    failed: number;
    tasksTotal: number;
    tasksDone: number;
    tasksRunning: number;
  }[];
  tasks: { pending: number; running: number; succeeded: number; failed: number; cancelled: number };
  /** Rows accounted for so far, all kinds and outcomes. */
  rows: number;
  budget: {
    burstCapacity: number;
    burstUsed: number;
    dailyRemaining: number | null;
    dailyResetAt: string | null;
    blockedUntil: string | null;
    spent: number;
    /** What the page lists, each fact labelled with its unit and period; what does not apply is left out. */
    facts: BudgetFact[];
  } | null;
  /**
   * While the run's source account is walled off (a 429's reset, a spent daily allowance): the
   * sentence the page shows, finished there with `until` in the reader's time and how long that is.
   */
  budgetWait: { text: string; until: string; timeZone?: string } | null;
  /**
   * A live run's ETA against its source account's budget (GetRun's eta): `text` as the page shows
   * it ("about 2 days 5 hours"), with what the run still needs; null once it ended or when the
   * source does not estimate its work.
   */
  eta: { text: string; seconds: number; requests: number; tokens: number; dailyResets: number } | null;
  /**
   * A run that follows its source until cutover (GetRun's follow): its replication lag (seconds
   * since the last finished pass began; null before one finished) and the changes each pass
   * applied; null for a run that finishes after its import.
   */
  follow: {
    intervalSeconds: number;
    cutoverAt: string | null;
    replicationLagSeconds: number | null;
    /** "webhooks", "polling" (feedReason says why) or "" (passes alone); docs/follow.md. */
    feed: string;
    feedReason: string;
    reconcileSeconds: number;
    /** With webhooks: the source time of the newest event turned into work. */
    lastEventAt: string | null;
    passes: {
      index: number;
      since: string | null;
      startsAt: string | null;
      finishedAt: string | null;
      changes: number;
      /** Of the changes, rows deleted at the source (or restored) that the pass applied. */
      deletions: number;
    }[];
  } | null;
  /**
   * A revert run: the run it reverts and, per kind in the order it goes (children first), records
   * removed, already gone, left in place (ListNotes says why) out of the kind's total. A reverted
   * run: the run that reverted it. Null for any other run.
   */
  revert: {
    reverts: string | null;
    revertedBy: string | null;
    force: boolean;
    removed: number;
    kept: number;
    kinds: { kind: string; removed: number; gone: number; kept: number; total: number }[];
  } | null;
  /** The check of the finished run against its source; null until there is one. */
  verification: VerificationJson | null;
  /** The run succeeded or failed and its (automatic) verification is still to come. */
  verificationPending: boolean;
  /** The run is a dry run: it wrote nothing, and `dryRun` says what a real run would do and cost. */
  isDryRun: boolean;
  dryRun: DryRunJson | null;
  /** What the run decided about its source once for all its tasks (GetRun's facts), for display. */
  facts: { key: string; value: string }[];
  error: string;
  createdAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  /**
   * redrive: a reason group's rows may be read again (RetryRun with a filter): the run has finished.
   * revert: "Revert this run" is offered: a finished run that wrote records, is not itself a revert
   * and was not reverted (RevertRun still checks what depends on its records).
   */
  can: { stop: boolean; resume: boolean; retry: boolean; redrive: boolean; revert: boolean };
}

export interface BudgetFact {
  label: string;
  text: string;
  /** A moment the page shows in the reader's time zone, after the text. */
  at?: string;
}

export interface VerificationJson {
  ok: boolean;
  error: string;
  verifiedAt: string | null;
  kinds: {
    kind: string;
    sourceCount: number;
    ledgerCount: number;
    failedCount: number;
    sampled: number;
    mismatches: string[];
  }[];
}

/** A dry run's report (GetRun's dry_run_report) in the page's terms. */
export interface DryRunJson {
  kinds: {
    kind: string;
    wouldCreate: number;
    wouldMatch: number;
    /** How the matches were found: a writer's rule (e.g. email) or an existing ledger row ("ledger"). */
    matchedBy: { rule: string; count: number }[];
    wouldSkip: number;
    /** Would-skip rows by the parent kind they miss ("none": they name no parent). */
    missingParents: { parent: string; count: number }[];
    wouldFail: number;
    reasons: NoteGroupJson[];
    requests: number;
    tokens: number;
  }[];
  requests: number;
  tokens: number;
  /** "about 3 days 4 hours": the real run's calls at the account's budget. */
  durationText: string;
  dailyResets: number;
}

function dryRunJson(run: Run): DryRunJson | null {
  const r = run.dryRunReport;
  if (!r) return null;
  return {
    kinds: r.kinds.map((k) => ({
      kind: k.kind,
      wouldCreate: Number(k.wouldCreate),
      wouldMatch: Number(k.wouldMatch),
      matchedBy: [
        ...Object.entries(k.matchedBy).map(([rule, n]) => ({ rule, count: Number(n) })),
        ...(k.alreadyHere > 0n ? [{ rule: "ledger", count: Number(k.alreadyHere) }] : []),
      ],
      wouldSkip: Number(k.wouldSkip),
      missingParents: Object.entries(k.missingParents).map(([parent, n]) => ({ parent, count: Number(n) })),
      wouldFail: Number(k.wouldFail),
      reasons: k.reasons.map((g) => ({
        level: g.level,
        kind: g.kind,
        reason: g.reason,
        count: Number(g.count),
        samples: [...g.sampleSubjectIds],
      })),
      requests: Number(k.requests),
      tokens: Number(k.tokens),
    })),
    requests: Number(r.requests),
    tokens: Number(r.tokens),
    durationText: r.durationText,
    dailyResets: r.dailyResets,
  };
}

export interface NoteGroupJson {
  level: string;
  kind: string;
  reason: string;
  count: number;
  samples: string[];
}

const iso = (t: Timestamp | undefined): string | null => (t ? timestampDate(t).toISOString() : null);

export function runJson(run: Run, now = Date.now()): RunJson {
  const progress = progressJson(run);
  return {
    id: run.id,
    tenantId: run.tenantId,
    source: run.source,
    sourceAccount: run.sourceAccount,
    status: runStatusName(run.status),
    phases: run.phases.map((p) => [...p.kinds]),
    currentPhase: run.currentPhase,
    progress,
    tasks: {
      pending: Number(run.tasks?.pending ?? 0n),
      running: Number(run.tasks?.running ?? 0n),
      succeeded: Number(run.tasks?.succeeded ?? 0n),
      failed: Number(run.tasks?.failed ?? 0n),
      cancelled: Number(run.tasks?.cancelled ?? 0n),
    },
    rows: progress.reduce((n, p) => n + p.imported + p.matched + p.alreadyHere + p.skipped + p.failed, 0),
    facts: runFacts(run),
    budget: budgetJson(run),
    budgetWait: budgetWait(run, now),
    eta: etaJson(run),
    follow: followJson(run),
    revert: revertJson(run),
    verification: verificationJson(run),
    // A dry run wrote nothing of its own: it is never verified.
    verificationPending:
      !run.dryRun && !run.revert?.reverts && !run.verification && VERIFIED_AUTOMATICALLY.has(run.status),
    isDryRun: run.dryRun,
    dryRun: dryRunJson(run),
    error: run.error,
    createdAt: iso(run.createdAt),
    startedAt: iso(run.startedAt),
    finishedAt: iso(run.finishedAt),
    can: steering(run),
  };
}

function progressJson(run: Run): RunJson["progress"] {
  return run.progress.map((p) => ({
    kind: p.kind,
    imported: Number(p.imported),
    matched: Number(p.matched),
    alreadyHere: Number(p.alreadyHere),
    skipped: Number(p.skipped),
    failed: Number(p.failed),
    tasksTotal: Number(p.tasksTotal),
    tasksDone: Number(p.tasksDone),
    tasksRunning: Number(p.tasksRunning),
  }));
}

function budgetJson(run: Run): RunJson["budget"] {
  const b = run.budget;
  if (!b) return null;
  return {
    burstCapacity: b.burstCapacity,
    burstUsed: b.burstUsed,
    dailyRemaining: b.dailyKnown ? Number(b.dailyRemaining) : null,
    dailyResetAt: iso(b.dailyResetAt),
    blockedUntil: iso(b.blockedUntil),
    spent: Number(b.spent),
    facts: budgetFacts(run),
  };
}

/** GetRun carries it only while the run is running. */
function etaJson(run: Run): RunJson["eta"] {
  if (!run.eta) return null;
  return {
    text: run.eta.text,
    seconds: Number(run.eta.seconds),
    requests: Number(run.eta.requestsLeft),
    tokens: Number(run.eta.tokensLeft),
    dailyResets: run.eta.dailyResets,
  };
}

function followJson(run: Run): RunJson["follow"] {
  const f = run.follow;
  if (!f) return null;
  return {
    intervalSeconds: f.intervalSeconds,
    cutoverAt: iso(f.cutoverAt),
    replicationLagSeconds: f.replicationLagSeconds === undefined ? null : Number(f.replicationLagSeconds),
    feed: f.feed,
    feedReason: f.feedReason,
    reconcileSeconds: f.reconcileSeconds,
    lastEventAt: iso(f.lastEventAt),
    passes: f.passes.map((p) => ({
      index: p.index,
      since: iso(p.since),
      startsAt: iso(p.startsAt),
      finishedAt: iso(p.finishedAt),
      changes: Number(p.changes),
      deletions: Number(p.deletions),
    })),
  };
}

function revertJson(run: Run): RunJson["revert"] {
  const r = run.revert;
  if (!r) return null;
  return {
    reverts: r.reverts || null,
    revertedBy: r.revertedBy || null,
    force: r.force,
    removed: Number(r.removed),
    kept: Number(r.kept),
    kinds: r.kinds.map((k) => ({
      kind: k.kind,
      removed: Number(k.removed),
      gone: Number(k.gone),
      kept: Number(k.kept),
      total: Number(k.total),
    })),
  };
}

function verificationJson(run: Run): RunJson["verification"] {
  const v = run.verification;
  if (!v) return null;
  return {
    ok: v.ok,
    error: v.error,
    verifiedAt: iso(v.verifiedAt),
    kinds: v.kinds.map((k) => ({
      kind: k.kind,
      sourceCount: Number(k.sourceCount),
      ledgerCount: Number(k.ledgerCount),
      failedCount: Number(k.failedCount),
      sampled: Number(k.sampled),
      mismatches: [...k.mismatches],
    })),
  };
}

/** Which steering buttons the run's status allows. */
function steering(run: Run): RunJson["can"] {
  return {
    stop: run.status === RunStatus.PENDING || run.status === RunStatus.RUNNING,
    resume: run.status === RunStatus.STOPPED,
    retry: run.status === RunStatus.FAILED,
    redrive: !run.revert?.reverts && (run.status === RunStatus.SUCCEEDED || run.status === RunStatus.FAILED),
    revert:
      !run.dryRun &&
      !run.revert &&
      (run.status === RunStatus.SUCCEEDED ||
        run.status === RunStatus.FAILED ||
        run.status === RunStatus.STOPPED),
  };
}

// A stopped run is verified only on demand (VerifyRun): it may be resumed.
const VERIFIED_AUTOMATICALLY = new Set([RunStatus.SUCCEEDED, RunStatus.FAILED]);
const LIVE = new Set([RunStatus.PENDING, RunStatus.RUNNING, RunStatus.STOPPING]);

/** The same words as `drover status` and `drover watch` say them (packages/cli render.ts). */
function budgetWait(run: Run, now: number): RunJson["budgetWait"] {
  const b = run.budget;
  if (
    b?.dailySpent &&
    b.dailyResetAt &&
    LIVE.has(run.status) &&
    timestampDate(b.dailyResetAt).getTime() > now
  ) {
    // The day's allowance is spent: the page says the reset in the account's time zone, as status does.
    return {
      text: `waiting for the daily budget of ${run.sourceAccount} until`,
      until: iso(b.dailyResetAt)!,
      ...(b.dailyResetTimeZone ? { timeZone: b.dailyResetTimeZone } : {}),
    };
  }
  const until = run.budget?.blockedUntil;
  if (!until || !LIVE.has(run.status) || timestampDate(until).getTime() <= now) return null;
  return { text: `waiting for the source's budget (${run.sourceAccount}) until`, until: iso(until)! };
}

/**
 * The source account's budget as facts that say what they count: the burst window and a wall only
 * while the run can still be held by them; the daily allowance only once the source has reported
 * it; what was spent, in the source's token units, by every run on the account since Drover first
 * read it (the budget belongs to the account, not to this run).
 */
export function budgetFacts(run: Run): BudgetFact[] {
  const b = run.budget;
  if (!b) return [];
  const facts: BudgetFact[] = [];
  const live = LIVE.has(run.status);
  const n = (v: number | bigint) => Number(v).toLocaleString("en-US");
  if (live)
    facts.push({ label: "burst window", text: `${n(b.burstUsed)} of ${n(b.burstCapacity)} requests in use` });
  if (live && b.blockedUntil)
    facts.push({ label: "walled off", text: "no request to the source until", at: iso(b.blockedUntil)! });
  if (b.dailyKnown)
    facts.push({
      label: "daily allowance left",
      text: `${n(b.dailyRemaining)} token units${b.dailyResetAt ? ", renewed" : ""}`,
      ...(b.dailyResetAt ? { at: iso(b.dailyResetAt)! } : {}),
    });
  facts.push({
    label: "spent on this account",
    text: `${n(b.spent)} token units (the source's measure of requests), by every run on ${run.source}:${run.sourceAccount} since Drover first read it`,
  });
  return facts;
}

export function noteGroupJson(g: NoteGroup): NoteGroupJson {
  return {
    level: g.level,
    kind: g.kind,
    reason: g.reason,
    count: Number(g.count),
    samples: [...g.sampleSubjectIds],
  };
}

/** One line of the run's history (its audit events): who did what, from where, and how it ended. */
export interface AuditEventJson {
  at: string | null;
  who: string;
  action: string;
  /** "ok", or the refusal's gRPC code name. */
  outcome: string;
  message: string;
  from: string;
  details: Record<string, string>;
}

export function auditEventJson(e: AuditEvent): AuditEventJson {
  return {
    at: e.at ? timestampDate(e.at).toISOString() : null,
    who: e.actor,
    action: e.action,
    outcome: e.outcome,
    message: e.message,
    from: e.peer,
    details: { ...e.details },
  };
}

export interface ThroughputJson {
  bucketSeconds: number;
  /** Rows the run accounted for in each bucket, from `at` on; the last bucket may still be filling. */
  points: { at: string; rows: number }[];
}

export function throughputJson(t: GetThroughputResponse): ThroughputJson {
  return {
    bucketSeconds: t.bucketSeconds,
    points: t.points.map((p) => ({ at: iso(p.at) ?? "", rows: Number(p.rows) })),
  };
}
