import {
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
 * enum values, "already here" as one count (matched records and ledger hits alike), and which
 * steering buttons the run's status allows.
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
  } | null;
  /** What the run decided about its source once for all its tasks (GetRun's facts), for display. */
  facts: { key: string; value: string }[];
  error: string;
  createdAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  can: { stop: boolean; resume: boolean; retry: boolean };
}

export interface NoteGroupJson {
  level: string;
  kind: string;
  reason: string;
  count: number;
  samples: string[];
}

const iso = (t: Timestamp | undefined): string | null => (t ? timestampDate(t).toISOString() : null);

export function runJson(run: Run): RunJson {
  const progress = run.progress.map((p) => ({
    kind: p.kind,
    imported: Number(p.imported),
    alreadyHere: Number(p.matched + p.alreadyHere),
    skipped: Number(p.skipped),
    failed: Number(p.failed),
    tasksTotal: Number(p.tasksTotal),
    tasksDone: Number(p.tasksDone),
    tasksRunning: Number(p.tasksRunning),
  }));
  const b = run.budget;
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
    rows: progress.reduce((n, p) => n + p.imported + p.alreadyHere + p.skipped + p.failed, 0),
    facts: runFacts(run),
    budget: b
      ? {
          burstCapacity: b.burstCapacity,
          burstUsed: b.burstUsed,
          dailyRemaining: b.dailyKnown ? Number(b.dailyRemaining) : null,
          dailyResetAt: iso(b.dailyResetAt),
          blockedUntil: iso(b.blockedUntil),
          spent: Number(b.spent),
        }
      : null,
    error: run.error,
    createdAt: iso(run.createdAt),
    startedAt: iso(run.startedAt),
    finishedAt: iso(run.finishedAt),
    can: {
      stop: run.status === RunStatus.PENDING || run.status === RunStatus.RUNNING,
      resume: run.status === RunStatus.STOPPED,
      retry: run.status === RunStatus.FAILED,
    },
  };
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
