import { setMaxListeners } from "node:events";
import { runs } from "@drover/db";
import { classifyError, PermanentError, RateLimitedError } from "@drover/provider-sdk";
import { describeError } from "@drover/provider-sdk/engine";
import { eq } from "drizzle-orm";
import { retryDelayMs } from "./backoff.js";
import { openSourceSecret, toRunInfo } from "./run-info.js";
import { type VerificationResult, verifyRun } from "./source-comparison.js";
import type { AssignmentControls, TaskRunnerDeps } from "./task-runner.js";
import {
  claimVerification,
  deferVerification,
  handBackVerification,
  parkVerification,
  storeVerification,
  touchVerification,
  VERIFICATION_MAX_ATTEMPTS,
  type VerificationClaim,
} from "./verification-transitions.js";

export type VerificationOutcome =
  | { status: "dropped"; runId: string; reason: string }
  | {
      status: "verified" | "deferred" | "parked" | "handed_back" | "lost";
      runId: string;
      attempt: number;
      ok?: boolean;
      mismatches?: number;
      error?: string;
    };

/** Well inside VERIFICATION_STALE_MS, so a live verification is never taken over. */
const TOUCH_EVERY_MS = 5_000;

class LostVerificationClaim extends Error {}

/**
 * Runs one verification request on this worker: claim it, open the run's source credential (here,
 * and only on workers), walk the source with the account's shared budget, and store the result.
 * A transient failure (the source unreachable) is deferred with backoff and stored as the result
 * only after VERIFICATION_MAX_ATTEMPTS; a rate limit parks the request until the wall it states,
 * without counting the attempt (as a task parks); a permanent failure is stored at once.
 * Never throws for the verification's own failure.
 */
export async function runVerification(
  deps: TaskRunnerDeps,
  runId: string,
  controls: AssignmentControls,
): Promise<VerificationOutcome> {
  const { db } = deps;
  const [run] = await db.select().from(runs).where(eq(runs.id, runId));
  if (!run) return { status: "dropped", runId, reason: "no such run" };
  const provider = deps.providers.get(run.source);
  const claim = await claimVerification(db, runId, deps.workerId);
  if (!claim) return { status: "dropped", runId, reason: "not due, claimed by another worker, or re-armed" };

  const abort = new AbortController();
  // The verifier's concurrent calls, and their backoff sleeps, all listen on this one signal.
  setMaxListeners(256, abort.signal);
  const onShutdown = () => abort.abort(controls.shutdown.reason);
  controls.shutdown.addEventListener("abort", onShutdown, { once: true });
  const heartbeat = setInterval(() => {
    controls.working();
    touchVerification(db, claim)
      .then((held) => {
        if (!held) abort.abort(new LostVerificationClaim());
      })
      .catch(() => {
        // The database blinked; the next touch decides, and the stale threshold is far away.
      });
  }, TOUCH_EVERY_MS);
  let secret: string | undefined;
  try {
    let result: VerificationResult;
    try {
      if (!provider)
        throw new PermanentError(`the run uses source "${run.source}", which this worker does not know`);
      secret = openSourceSecret(run, deps.secrets);
      result = await verifyRun(db, provider, run, {
        sampleSize: claim.sampleSize,
        pacer: deps.pacerFor?.(toRunInfo(run)),
        secret,
        signal: abort.signal,
      });
    } catch (err) {
      if (abort.signal.aborted) return await interrupted(deps, claim, abort.signal.reason);
      const cls = classifyError(err);
      const reason = describeError(err);
      if (cls === "rate_limited") {
        // The account is walled off: wait for the wall like a task, without spending an attempt.
        const until = err instanceof RateLimitedError ? err.retryAt : new Date(Date.now() + 60_000);
        await parkVerification(db, claim, reason, until);
        return { status: "parked", runId, attempt: claim.attempts, error: reason };
      }
      if (cls === "transient" && claim.attempts < VERIFICATION_MAX_ATTEMPTS) {
        await deferVerification(db, claim, reason, retryDelayMs(claim.attempts));
        return { status: "deferred", runId, attempt: claim.attempts, error: reason };
      }
      result = { ok: false, verifiedAt: new Date(), kinds: [], error: reason };
    }
    const stored = await storeVerification(db, claim, result);
    if (!stored) return { status: "lost", runId, attempt: claim.attempts };
    return {
      status: "verified",
      runId,
      attempt: claim.attempts,
      ok: result.ok,
      mismatches: result.kinds.reduce((n, k) => n + k.mismatches.length, 0),
      ...(result.error ? { error: result.error } : {}),
    };
  } finally {
    clearInterval(heartbeat);
    controls.shutdown.removeEventListener("abort", onShutdown);
  }
}

async function interrupted(
  deps: TaskRunnerDeps,
  claim: VerificationClaim,
  reason: unknown,
): Promise<VerificationOutcome> {
  if (reason instanceof LostVerificationClaim)
    return { status: "lost", runId: claim.runId, attempt: claim.attempts };
  await handBackVerification(deps.db, claim);
  return { status: "handed_back", runId: claim.runId, attempt: claim.attempts };
}
