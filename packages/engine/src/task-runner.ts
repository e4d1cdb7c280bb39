import { randomUUID } from "node:crypto";
import type { SecretKeyring } from "@drover/auth";
import { type Db, executePrepared, isDatabaseUnavailable, runs, tasks } from "@drover/db";
import { resolveParents } from "@drover/ledger";
import {
  type BudgetPacer,
  classifyError,
  PermanentError,
  type ProductRecords,
  type Provider,
  RateLimitedError,
  REDRIVE_SEED_KEY_PREFIX,
  type RunInfo,
  type TaskContext,
  type TaskInfo,
  type TaskResult,
  type WriteSummary,
} from "@drover/provider-sdk";
import {
  DestinationSchemaError,
  DestinationStallError,
  describeError,
  FIRST_PROBE_MS,
  redactSecret,
} from "@drover/provider-sdk/engine";
import { Attr, withAttributes } from "@drover/telemetry";
import { eq, sql } from "drizzle-orm";
import { retryDelayMs } from "./backoff.js";
import { tracePage } from "./instrumentation.js";
import { ledgerLookup } from "./ledger-lookup.js";
import { appendNoteOnce } from "./notes.js";
import { runRevertTask } from "./revert.js";
import { keptCursors, readRunFact, settleRunFact } from "./run-facts.js";
import { openSourceSecret, toRunInfo } from "./run-info.js";
import { SourceCallCounter } from "./source-calls.js";
import { dryRunMatches } from "./source-capabilities.js";
import { applySourceDeletions, heldSourceCounts, heldSourceRows } from "./source-deletions.js";
import {
  type HandedOn,
  handOnLockedSlot,
  overFairShare,
  runDispatchLock,
  undispatchTasks,
  yieldSlot,
} from "./task-dispatch.js";
import {
  cancelPendingTask,
  claimTask,
  finishTaskCancelled,
  finishTaskFailed,
  finishTaskSucceeded,
  handBackTask,
  LostClaimError,
  parkSiblings,
  parkTask,
  releaseTask,
  touchTask,
  writeCheckpoint,
} from "./task-transitions.js";
import type { WindowWriterDeps } from "./window-deps.js";
import { addSummary, emptySummary } from "./window-tally.js";
import { WINDOW_DEADLINE_MS, windowTransaction } from "./window-transaction.js";
import { TaskCancelledError, writeBatches, writeRows } from "./window-writer.js";

export interface TaskRunnerDeps {
  db: Db;
  providers: ReadonlyMap<string, Provider>;
  workerId: string;
  /** Transient failures a task may have before it fails for good. */
  maxAttempts: number;
  notesCap: number;
  /** How often, at most, a running task asks whether its run is stopping. */
  stopPollMs?: number;
  /** How long one window's transaction may take before the attempt fails transiently (WINDOW_DEADLINE_MS). */
  windowDeadlineMs?: number;
  /** How long a run waits after the destination's schema refused its rows (DESTINATION_PROBE_MS). */
  destinationProbeMs?: number;
  /** Records a revert task removes per window (REVERT_WINDOW_SIZE). */
  revertWindowSize?: number;
  /** The source account's shared budget, when the worker leases one. */
  pacerFor?(run: RunInfo): BudgetPacer;
  /** Opens runs' source credentials for the provider; without it, providers get none. */
  secrets?: SecretKeyring;
  /**
   * How often a running task refreshes its lock between windows (TOUCH_EVERY_MS). Must stay well
   * under the reaper's stale threshold: checked at start by the worker's configuration.
   */
  touchEveryMs?: number;
  /**
   * The id of the worker's current liveness record (drover.workers): claims are fenced on it being
   * alive and name it, so the reaper can release them the moment the worker dies. Without it claims
   * carry no record and only the stale-lock threshold frees a dead worker's tasks.
   */
  workerRecord?(): string;
  /**
   * A succeeded task's finish also hands its lane slot on (handOnLockedSlot) in the same commit:
   * the outcome carries the tasks it marked published, for the caller to publish. Without it the
   * caller hands the slot on itself, in a transaction of its own, after the finish.
   */
  handOnAtFinish?: boolean;
}

const NOTHING_HANDED_ON: HandedOn = { ids: [], traceContext: null };

export interface AssignmentControls {
  /** Aborted when this worker shuts down: the task hands itself back at the next window boundary. */
  shutdown: AbortSignal;
  working(): void;
  /**
   * Told the claim token the moment the task is claimed and told again (null) when the attempt
   * has ended, so a worker whose grace time ran out can hand back, by token, what it still holds.
   */
  onClaim?(claim: HeldClaim | null): void;
}

/** A task this worker holds: the fence its hand-back needs. */
export interface HeldClaim {
  taskId: number;
  claimToken: string;
}

export type AssignmentOutcome =
  | { status: "dropped"; reason: string }
  | {
      status:
        | "succeeded"
        | "failed"
        | "cancelled"
        | "released"
        | "parked"
        | "handed_back"
        | "yielded"
        | "lost";
      taskId: number;
      runId: string;
      phase: number;
      kind: string;
      attempt: number;
      summary: WriteSummary;
      error?: string;
      /** A succeeded task's finish handed its slot on (TaskRunnerDeps.handOnAtFinish): these are to publish. */
      handedOn?: HandedOn;
    };

class ShutdownHandBack extends Error {}
/** The task gave its lane slot up to a waiting run (yieldSlot): it is pending again, nothing more to do. */
class SlotYielded extends Error {}

/** Between windows a run's stop flag is read at most this often; stop still lands in about a second. */
const DEFAULT_STOP_POLL_MS = 1_000;
/**
 * "Every row failed" says something systematic (the source changed its format) only over a few
 * rows: a task of one or two rows (a deal with one message, the last row of a list) that happen to
 * be malformed fails them, noted with their reasons, and must not fail the task and the run with it
 * — a retry would find the same rows malformed, and the run could never succeed.
 */
const EVERY_ROW_FAILED_MIN_ROWS = 3;
/** A sixth of the reaper's default stale-lock threshold (90 s): five touches may fail before it gives up. */
export const TOUCH_EVERY_MS = 15_000;

/**
 * Runs one assignment: load the task and run, refuse what must not run, claim, hand off to the
 * provider, and end the attempt according to the error taxonomy. Never throws for a task's own
 * failure; a throw means the database itself is unreachable, or this worker's liveness record expired
 * (DeadWorkerError), and the message should come back later.
 */
export async function runAssignment(
  deps: TaskRunnerDeps,
  taskId: number,
  controls: AssignmentControls,
): Promise<AssignmentOutcome> {
  const admitted = await admit(deps, taskId);
  if ("dropped" in admitted) return admitted.dropped;
  const { task, run, provider } = admitted;
  const { db } = deps;

  const claimToken = `${deps.workerId}/${randomUUID().slice(0, 8)}`;
  // A DeadWorkerError (this worker's record expired) propagates: the message comes back for a live worker.
  const claimed = await claimTask(db, task.id, claimToken, deps.workerRecord?.());
  if (!claimed) return { status: "dropped", reason: "claimed by another worker" };

  const attempt = new Attempt(deps, controls, claimed, toRunInfo(run), claimToken);
  const ctx = taskContext(deps, attempt, provider, controls);
  const touching = touchWhileHeld(deps, attempt);
  controls.onClaim?.({ taskId: task.id, claimToken });
  const base = {
    taskId: task.id,
    runId: run.id,
    phase: task.phase,
    kind: task.kind,
    attempt: claimed.attempts,
  };
  const total = attempt.total;
  let secret: string | undefined;
  try {
    // Decrypted here and only here, and handed to the provider alone (not to the writer, notes or logs).
    secret = openSourceSecret(run, deps.secrets);
    ctx.run = { ...attempt.run, secret };
    const result = await withAttributes(
      {
        [Attr.runId]: run.id,
        [Attr.taskId]: task.id,
        [Attr.kind]: task.kind,
        [Attr.phase]: task.phase,
        [Attr.attempt]: claimed.attempts,
      },
      () =>
        run.revertsRunId
          ? revertTask(deps, attempt, run, run.revertsRunId, provider.productRecords)
          : provider.runTask(ctx),
    );
    if (attempt.claimLost) return { ...base, status: "lost", summary: total };
    // A re-drive reads rows that failed already: those still bad stay failed with a fresh note, and
    // the run keeps the outcome it had (a plain retry would find nothing more to do either).
    const readsAgain = task.seedKey.startsWith(REDRIVE_SEED_KEY_PREFIX);
    if (!readsAgain && total.attempted >= EVERY_ROW_FAILED_MIN_ROWS && total.failed === total.attempted) {
      // Per-row isolation is right, but a task whose every row failed must not finish green.
      const error = `every row failed (${total.failed}); see the run's notes`;
      await finishTaskFailed(db, task.id, claimToken, error);
      return { ...base, status: "failed", summary: total, error };
    }
    // The attempt's last transaction is bounded like its windows: a finish the driver lost track of
    // must not hold the lane. Fenced by the claim token, so a finish that did commit unseen makes
    // the retry's release a lost claim, never a second run of the task.
    const done = await windowTransaction(db, deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, async (tx) => {
      // The run's lock before the task's row, as yieldSlot takes them (handOnLockedSlot).
      if (deps.handOnAtFinish) await executePrepared(tx, runDispatchLock(claimed.runId));
      const calls = attempt.calls.take();
      if (!(await finishTaskSucceeded(tx, claimed, claimToken, result.successors ?? [], calls)))
        return undefined;
      return deps.handOnAtFinish ? await handOnLockedSlot(tx, claimed.runId) : NOTHING_HANDED_ON;
    });
    if (!done) return { ...base, status: "lost", summary: total };
    return {
      ...base,
      status: "succeeded",
      summary: total,
      ...(deps.handOnAtFinish ? { handedOn: done } : {}),
    };
  } catch (err) {
    if (attempt.yielded) return { ...base, status: "yielded", summary: total };
    return {
      ...base,
      summary: total,
      ...(await endFailedAttempt(
        deps,
        claimed,
        claimToken,
        // Whatever the abort made the provider throw, the attempt ends as a lost claim: no write.
        attempt.claimLost ? new LostClaimError(task.id) : scrubbed(err, secret),
        controls.shutdown,
        attempt.run,
      )),
    };
  } finally {
    clearInterval(touching);
    controls.onClaim?.(null);
    attempt.close();
  }
}

type TaskRow = typeof tasks.$inferSelect;
type RunRow = typeof runs.$inferSelect;

/** The task and its run, if this assignment may run: else why it is dropped (nothing claimed). */
async function admit(
  deps: TaskRunnerDeps,
  taskId: number,
): Promise<{ dropped: AssignmentOutcome } | { task: TaskRow; run: RunRow; provider: Provider }> {
  const { db } = deps;
  const drop = (reason: string) => ({ dropped: { status: "dropped" as const, reason } });
  const [loaded] = await db
    .select({ task: tasks, run: runs })
    .from(tasks)
    .innerJoin(runs, eq(runs.id, tasks.runId))
    .where(eq(tasks.id, taskId));
  if (!loaded) return drop("no such task");
  const { task, run } = loaded;
  if (task.status !== "pending") return drop(`task is ${task.status}`);
  if (run.status === "stopping") {
    await cancelPendingTask(db, task.id);
    return drop("run is stopping");
  }
  if (run.status !== "running") return drop(`run is ${run.status}`);
  if (task.availableAt.getTime() > Date.now() + 50) {
    // A duplicate message that arrived before the task is due: let the dispatcher publish it again then.
    await undispatchTasks(db, [task.id]);
    return drop("not due yet");
  }
  const provider = deps.providers.get(run.source);
  if (!provider) return drop(`unknown source ${run.source}`);
  return { task, run, provider };
}

/**
 * One claimed attempt's state: the task as the provider sees it, what it wrote and spent, and how
 * it may be interrupted (a stop, a shutdown, a slot yielded to a run under its share, a claim lost).
 */
class Attempt {
  readonly info: TaskInfo;
  readonly total = emptySummary();
  /** Aborts the provider's fetches: a shutdown, or the claim found gone. */
  readonly abort = new AbortController();
  /**
   * What this attempt spends on the source, handed to the stats with each checkpoint: a dry run's
   * cost report is the sum of its tasks' (the same walk a real run makes).
   */
  readonly calls: SourceCallCounter;
  /**
   * Set when a touch finds the claim gone (the reaper handed the task on): from then on the attempt
   * must not call the source or write anything, another attempt owns the task.
   */
  claimLost = false;
  /** Set once yieldSlot gave the task back: whatever the provider makes of the throw, the attempt is over. */
  yielded = false;
  private lastStopCheck = 0;
  private readonly onShutdown = () => this.abort.abort(this.controls.shutdown.reason);

  constructor(
    private readonly deps: TaskRunnerDeps,
    private readonly controls: AssignmentControls,
    readonly claimed: TaskRow,
    readonly run: RunInfo,
    readonly claimToken: string,
  ) {
    this.info = {
      id: claimed.id,
      kind: claimed.kind,
      phase: claimed.phase,
      cursor: claimed.cursor,
      processedOffset: claimed.processedOffset,
      attempts: claimed.attempts,
    };
    this.calls = new SourceCallCounter(deps.pacerFor?.(run));
    controls.shutdown.addEventListener("abort", this.onShutdown, { once: true });
  }

  /**
   * Between windows: true when the run no longer goes (the task ends cancelled); throws when the
   * attempt must end (claim lost, shutdown, slot yielded).
   */
  readonly interrupted = async (): Promise<boolean> => {
    const { db } = this.deps;
    if (this.claimLost) throw new LostClaimError(this.info.id);
    if (this.controls.shutdown.aborted) throw new ShutdownHandBack();
    if (Date.now() - this.lastStopCheck < (this.deps.stopPollMs ?? DEFAULT_STOP_POLL_MS)) return false;
    this.lastStopCheck = Date.now();
    const [r] = await db.select({ status: runs.status }).from(runs).where(eq(runs.id, this.run.id));
    if (r?.status !== "running") return true;
    // Between windows is where a slot can change hands without losing work: every committed
    // window is checkpointed, so the run resumes here when its share allows.
    if (
      (await overFairShare(db, this.run.id)) &&
      (await yieldSlot(db, this.run.id, this.info.id, this.claimToken))
    ) {
      this.yielded = true;
      throw new SlotYielded();
    }
    return false;
  };

  close(): void {
    this.controls.shutdown.removeEventListener("abort", this.onShutdown);
  }
}

/** What the provider is handed for one attempt: its task, its pacer, and the engine's writes. */
function taskContext(
  deps: TaskRunnerDeps,
  attempt: Attempt,
  provider: Provider,
  controls: AssignmentControls,
): TaskContext {
  const { db } = deps;
  const { info, run: runInfo, claimToken, calls, total } = attempt;
  const writerDeps: WindowWriterDeps = {
    db,
    takeSourceCalls: () => calls.take(),
    restoreSourceCalls: (taken) => calls.restore(taken),
    run: runInfo,
    task: info,
    claimToken,
    notesCap: deps.notesCap,
    stopRequested: attempt.interrupted,
    ledger: provider.ledger ?? "per-row",
    windowDeadlineMs: deps.windowDeadlineMs,
    destinationProbeMs: deps.destinationProbeMs,
  };
  return {
    run: runInfo,
    task: info,
    signal: attempt.abort.signal,
    working: controls.working,
    pacer: calls.pacer,
    async writeRows(rows, writer, options) {
      const summary = await tracePage(info.kind, rows.length, () =>
        writeRows(writerDeps, rows, writer, options),
      );
      addSummary(total, summary);
      return summary;
    },
    async writeBatches(rows, writer, options) {
      const summary = await tracePage(info.kind, rows.length, () =>
        writeBatches(writerDeps, rows, writer, options),
      );
      addSummary(total, summary);
      return summary;
    },
    async keepCursor(cursor) {
      await windowTransaction(db, deps.windowDeadlineMs ?? WINDOW_DEADLINE_MS, (tx) =>
        writeCheckpoint(tx, info.id, claimToken, {
          processedOffset: info.processedOffset,
          cursor,
          statsDelta: calls.take(),
        }),
      );
      info.cursor = cursor;
    },
    heldSourceRows: (kind) => heldSourceRows(db, runInfo, kind),
    heldSourceCounts: (kind) => heldSourceCounts(db, runInfo, kind),
    async applySourceDeletions(kind, change, cursor) {
      const applied = await applySourceDeletions(
        {
          db,
          run: runInfo,
          taskId: info.id,
          claimToken,
          notesCap: deps.notesCap,
          records: provider.productRecords,
          windowDeadlineMs: deps.windowDeadlineMs,
          destinationProbeMs: deps.destinationProbeMs,
          takeSourceCalls: () => calls.take(),
        },
        kind,
        change,
        cursor,
      );
      info.cursor = cursor;
      info.processedOffset = 0;
      return applied;
    },
    ledger: ledgerLookup(db, runInfo),
    async resolveParents(wanted) {
      const parents = await resolveParents(
        db,
        runInfo,
        wanted,
        runInfo.dryRun ? { dryRunId: runInfo.id } : {},
      );
      return runInfo.dryRun ? { ...parents, dryRun: dryRunMatches(runInfo.id) } : parents;
    },
    runFact: (key) => readRunFact(db, runInfo.id, key),
    settleRunFact: (key, value) => settleRunFact(db, runInfo.id, key, value),
    noteOnce: (note) => appendNoteOnce(db, runInfo.id, info.id, note),
    keptCursors: (kind, key) => keptCursors(db, runInfo.id, kind, key),
  };
}

/** A revert run's task (revert.ts): no source call, only the product and the ledger. */
async function revertTask(
  deps: TaskRunnerDeps,
  attempt: Attempt,
  run: RunRow,
  revertsRunId: string,
  records: ProductRecords | undefined,
): Promise<TaskResult> {
  if (!records) throw new PermanentError(`source ${run.source} cannot remove the records it wrote`);
  const { stopped } = await runRevertTask({
    db: deps.db,
    run,
    revertsRunId,
    records,
    task: attempt.info,
    claimToken: attempt.claimToken,
    notesCap: deps.notesCap,
    windowDeadlineMs: deps.windowDeadlineMs,
    destinationProbeMs: deps.destinationProbeMs,
    windowSize: deps.revertWindowSize,
    stopRequested: attempt.interrupted,
  });
  if (stopped) throw new TaskCancelledError();
  return {};
}

/**
 * Windows refresh the lock too; this covers long fetches between them. A touch that finds the
 * claim gone aborts the attempt at once, down to the provider's fetches: spending the source's
 * budget for rows another attempt will fetch again is waste, and the writes would be refused anyway.
 * A touch that fails (the database unreachable) proves nothing and is tried again.
 */
function touchWhileHeld(deps: TaskRunnerDeps, attempt: Attempt): NodeJS.Timeout {
  return setInterval(
    () =>
      void touchTask(deps.db, attempt.info.id, attempt.claimToken)
        .then((held) => {
          if (held || attempt.claimLost) return;
          attempt.claimLost = true;
          attempt.abort.abort(new LostClaimError(attempt.info.id));
        })
        .catch(() => {}),
    deps.touchEveryMs ?? TOUCH_EVERY_MS,
  );
}

/**
 * Waits until the database answers a query again, or the worker is stopping (false: the task is
 * left to the reaper, which finds it once the server is back).
 */
async function untilDatabaseAnswers(db: Db, shutdown: AbortSignal): Promise<boolean> {
  for (let delay = 100; !shutdown.aborted; delay = Math.min(1_000, delay * 2)) {
    try {
      await db.execute(sql`select 1`);
      return true;
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
    }
    await new Promise((r) => setTimeout(r, delay));
  }
  return false;
}

async function endFailedAttempt(
  deps: TaskRunnerDeps,
  task: { id: number; attempts: number; kind: string },
  claimToken: string,
  err: unknown,
  shutdown: AbortSignal,
  run: RunInfo,
): Promise<{ status: Exclude<AssignmentOutcome["status"], "dropped" | "succeeded">; error?: string }> {
  const { db } = deps;
  if (err instanceof LostClaimError) return { status: "lost" };
  if (err instanceof TaskCancelledError) {
    return (await finishTaskCancelled(db, task.id, claimToken))
      ? { status: "cancelled" }
      : { status: "lost" };
  }
  if (err instanceof ShutdownHandBack || shutdown.aborted) {
    return (await handBackTask(db, task.id, claimToken)) ? { status: "handed_back" } : { status: "lost" };
  }
  if (isDatabaseUnavailable(err)) {
    // The database went away under the attempt (a restart, a failover): not the task's fault, so
    // it spends no attempt. The task is handed back, as at a deploy, once the server answers again.
    if (!(await untilDatabaseAnswers(db, shutdown))) return { status: "lost" };
    return (await handBackTask(db, task.id, claimToken)) ? { status: "handed_back" } : { status: "lost" };
  }
  const error = describeError(err);
  const cls = classifyError(err);
  if (cls === "rate_limited") {
    const retryAt = err instanceof RateLimitedError ? err.retryAt : new Date(knownWall(deps, run));
    const parked = await parkTask(db, task.id, claimToken, retryAt, error);
    // The wall is the account's, not this task's: its pending siblings wait too instead of each
    // hitting it (only the run's own, when it is the run's spent daily share or its destination).
    await parkSiblings(db, run, retryAt, err instanceof RateLimitedError ? err.scope : "account");
    // Said once for the run, not once per row or per parked attempt: the same words every time.
    if (err instanceof DestinationSchemaError || err instanceof DestinationStallError)
      await appendNoteOnce(db, run.id, task.id, {
        level: "warn",
        kind: task.kind,
        subjectId: null,
        reason: error,
      });
    return parked ? { status: "parked", error } : { status: "lost" };
  }
  if (cls === "transient" && task.attempts < deps.maxAttempts) {
    const ok = await releaseTask(db, task.id, claimToken, error, retryDelayMs(task.attempts));
    return ok ? { status: "released", error } : { status: "lost" };
  }
  const reason = cls === "transient" ? `gave up after ${task.attempts} attempts: ${error}` : error;
  return (await finishTaskFailed(db, task.id, claimToken, reason))
    ? { status: "failed", error: reason }
    : { status: "lost" };
}

/**
 * A refusal that states no time of its own waits for the wall the account's pacer knows; with none,
 * for the first probe of a reset nothing stated (the account is asked again then, not hammered).
 */
function knownWall(deps: TaskRunnerDeps, run: RunInfo): number {
  const now = Date.now();
  const wall = deps.pacerFor?.(run).wallUntil?.() ?? 0;
  return wall > now ? wall : now + FIRST_PROBE_MS;
}

/**
 * The error without the credential in its text: a source that echoes the token it was sent (in a
 * 4xx body, say) must not put it into the task's last error, the logs or the run's error. The
 * source client already redacts what it reads; this catches what a provider built from it.
 */
function scrubbed(err: unknown, secret: string | undefined): unknown {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++)
    e.message = redactSecret(e.message, secret);
  return typeof err === "string" ? redactSecret(err, secret) : err;
}
