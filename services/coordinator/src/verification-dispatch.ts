import type { RunRow } from "@drover/db";
import {
  dueVerifications,
  requestAutomaticVerifications,
  requestVerificationNow,
  unmarkVerificationPublished,
  verificationRequestState,
} from "@drover/engine";
import { type CallContext, fromJson, type Verification, VerificationSchema } from "@drover/proto";
import { sleep } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import type { CoordinatorContext } from "./context.js";
import { DomainError, NotFound, Precondition, StillWorking, Unavailable } from "./domain-errors.js";

/** Runs that finished longer ago than this are verified only on demand (e.g. runs from before verification existed). */
const AUTOMATIC_WITHIN_MS = 48 * 3_600_000;
/** How often a waiting VerifyRun looks at its request. */
const POLL_MS = 200;
/** A VerifyRun without a deadline waits this long before saying the result will come later. */
const DEFAULT_WAIT_MS = 10 * 60_000;

/**
 * Verification of finished runs, stored on the run and shown by GetRun. The coordinator only asks:
 * verification reads the source with the customer's credential, which is opened on workers and
 * nowhere else, so a worker runs it (engine runVerification) and spends the account's budget the
 * way its tasks do.
 *
 * - Automatically: each leader reaper pass asks for the verification of runs that just finished,
 *   and publishes every request that is due (new, retried after a transient failure, or held by a
 *   worker that died) on the task queue.
 * - On demand: VerifyRun asks for a new verification (or joins the one running), publishes it, and
 *   waits for a worker to store the result. Any coordinator can answer it.
 */
export class Verifications {
  private readonly abort = new AbortController();

  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly publish: (runId: string) => Promise<void>,
  ) {}

  /** The leader's part of a reaper pass: ask for what finished, publish what is due. */
  async pass(): Promise<void> {
    if (this.abort.signal.aborted || !this.ctx.isLeader()) return;
    await requestAutomaticVerifications(this.ctx.db, {
      sampleSize: this.ctx.config.verifySampleSize,
      withinMs: AUTOMATIC_WITHIN_MS,
    });
    for (const runId of await dueVerifications(this.ctx.db)) await this.publish(runId);
  }

  /** Ends the waits of VerifyRuns in flight (they answer UNAVAILABLE). */
  stop(): void {
    this.abort.abort(new Error("the coordinator is stopping"));
  }

  /**
   * VerifyRun: the run's verification, made after the call arrived. A transient failure on the
   * worker answers UNAVAILABLE (the worker tries again later, and GetRun shows the result); a
   * permanent one is stored and returned as the verification's error.
   */
  async onDemand(run: RunRow, call: CallContext): Promise<Verification> {
    const asked = await requestVerificationNow(this.ctx.db, run.id, this.ctx.config.verifySampleSize);
    if (!asked)
      throw new Precondition(`run ${run.id} is not finished; verify it when it is`, "RUN_NOT_FINISHED");
    try {
      await this.publish(run.id);
    } catch (err) {
      // The broker is unreachable or slow (a restart, a leader election): the durable request
      // stands, and the leader's next pass publishes it; this call keeps waiting for the result.
      this.ctx.logger.warn({ err, runId: run.id }, "could not publish a verification; the leader will");
      await unmarkVerificationPublished(this.ctx.db, run.id);
    }
    const signal = AbortSignal.any([
      call.signal,
      this.abort.signal,
      AbortSignal.timeout(
        call.deadline ? Math.max(0, call.deadline.getTime() - Date.now()) : DEFAULT_WAIT_MS,
      ),
    ]);
    try {
      for (;;) {
        const state = await verificationRequestState(this.ctx.db, run.id);
        if (!state) throw new NotFound(`run ${run.id} no longer exists`, "RUN_NOT_FOUND");
        if (
          state.generation > asked.generation ||
          (state.generation === asked.generation && state.status === "done")
        ) {
          const [row] = await this.ctx.db.execute<{ verification: unknown }>(
            sql`select verification from drover.runs where id = ${run.id}::uuid`,
          );
          const verification = storedVerification(row?.verification);
          if (verification) return verification;
          throw new Precondition(
            `run ${run.id} was resumed or retried while it was being verified; verify it when it finishes again`,
            "RUN_RESUMED",
          );
        }
        // Deferred after a failure (an attempt counted), or parked behind the source's wall (not
        // counted, but due only after the wall): either way not now.
        const parked = state.notBefore.getTime() > Date.now();
        if (state.status === "pending" && (state.attempts > asked.attempts || parked) && state.lastError) {
          throw new Unavailable(
            `run ${run.id} could not be verified now: ${state.lastError}; it is tried again automatically, and GetRun shows the result`,
            "VERIFICATION_DEFERRED",
            Math.max(0, state.notBefore.getTime() - Date.now()),
          );
        }
        await sleep(POLL_MS, signal);
      }
    } catch (err) {
      if (err instanceof DomainError) throw err;
      if (call.signal.aborted) throw err;
      if (this.abort.signal.aborted)
        throw new Unavailable(
          "the coordinator is stopping; ask another one, or retry shortly",
          "COORDINATOR_STOPPING",
        );
      if (signal.aborted)
        throw new StillWorking(
          `run ${run.id} is still being verified (or no worker has taken the verification yet); GetRun shows the result when it is done`,
          "VERIFICATION_RUNNING",
        );
      throw err;
    }
  }
}

/** The stored verification (runs.verification), as GetRun shows it. */
export function storedVerification(value: unknown): Verification | undefined {
  if (value === null || value === undefined) return undefined;
  try {
    return fromJson(VerificationSchema, value as never, { ignoreUnknownFields: true });
  } catch {
    return undefined;
  }
}
