import { type Db, FINISHED_RUN_STATUSES, type Queryable, runStatusIn, verificationStatus } from "@drover/db";
import { sql } from "drizzle-orm";
import type { VerificationResult } from "./source-comparison.js";

/**
 * The life of a verification request (drover.verification_requests), every statement that moves it
 * in one place. Verification reads the source with the customer's credential, so a worker runs it;
 * the coordinator only asks. A request is claimed like a task: `status` plus a per-claim token fence
 * every later write, and `for_finished_at` ties it to one finish of the run, so a result can never
 * land on a run that was retried or resumed after it was asked for.
 */

/** A claim whose heartbeat (every 5 s) is older than this belongs to a worker that died; another may take over. Short, because a VerifyRun may be waiting on it. */
export const VERIFICATION_STALE_MS = 20_000;
/** A request published and not claimed since is published again (the message may have been lost). */
export const VERIFICATION_REPUBLISH_MS = 30_000;
/** Transient failures before the failure itself is stored as the verification's result. */
export const VERIFICATION_MAX_ATTEMPTS = 5;

const FINISHED = runStatusIn(FINISHED_RUN_STATUSES);

export interface VerificationClaim {
  runId: string;
  token: string;
  generation: number;
  sampleSize: number;
  attempts: number;
}

/**
 * Asks for the verification of every run that finished within `withinMs` and has none yet (the
 * leader calls it on each reaper pass). A run that finished again since its last request is asked
 * for again. A revert run is not verified: it read nothing from the source. Returns how many
 * requests were created or renewed.
 */
export async function requestAutomaticVerifications(
  q: Queryable,
  options: { sampleSize: number; withinMs: number },
): Promise<number> {
  const rows = await q.execute(sql`
    insert into drover.verification_requests as v (run_id, for_finished_at, sample_size)
    select r.id, r.finished_at, ${options.sampleSize} from drover.runs r
     where r.status in ${runStatusIn(["succeeded", "failed"])} and r.verification is null and r.summary is null
       and r.reverts_run_id is null
       and not r.dry_run
       and r.finished_at > now() - make_interval(secs => ${options.withinMs / 1000})
    on conflict (run_id) do update
       set for_finished_at = excluded.for_finished_at, sample_size = excluded.sample_size,
           status = ${verificationStatus.pending}, generation = v.generation + 1, attempts = 0, not_before = now(),
           claim_token = null, claimed_by = null, heartbeat_at = null, published_at = null,
           last_error = null, updated_at = now()
     where v.for_finished_at <> excluded.for_finished_at
    returning v.run_id`);
  return rows.length;
}

/**
 * VerifyRun: asks for a verification made from now on, unless one of this finish is running (the
 * caller then shares it). Returns the generation to wait for, or undefined when the run has not
 * finished. The request is marked published: the caller publishes it at once.
 */
export async function requestVerificationNow(
  q: Queryable,
  runId: string,
  sampleSize: number,
): Promise<{ generation: number; attempts: number } | undefined> {
  const [renewed] = await q.execute<{ generation: number; attempts: number }>(sql`
    insert into drover.verification_requests as v (run_id, for_finished_at, sample_size, published_at)
    select r.id, r.finished_at, ${sampleSize}, now() from drover.runs r
     where r.id = ${runId}::uuid and r.status in ${FINISHED} and r.finished_at is not null
    on conflict (run_id) do update
       set for_finished_at = excluded.for_finished_at, sample_size = excluded.sample_size,
           status = ${verificationStatus.pending}, generation = v.generation + 1, attempts = 0, not_before = now(),
           claim_token = null, claimed_by = null, heartbeat_at = null, published_at = now(),
           last_error = null, updated_at = now()
     where v.status <> ${verificationStatus.running} or v.for_finished_at <> excluded.for_finished_at
    returning v.generation, v.attempts`);
  if (renewed) return renewed;
  const [running] = await q.execute<{ generation: number; attempts: number }>(sql`
    select generation, attempts from drover.verification_requests
     where run_id = ${runId}::uuid and status = ${verificationStatus.running}`);
  return running;
}

/**
 * A publish that failed: the request is due again at the leader's next pass instead of waiting out
 * the republish interval (the request row, not the message, is what guarantees it is verified).
 */
export async function unmarkVerificationPublished(q: Queryable, runId: string): Promise<void> {
  await q.execute(sql`
    update drover.verification_requests set published_at = null
     where run_id = ${runId}::uuid and status = ${verificationStatus.pending}`);
}

/**
 * Requests that need a message on the queue: pending and due but not published recently, or held
 * by a claim whose worker stopped beating. Marks them published and returns their run ids.
 */
export async function dueVerifications(q: Queryable, limit = 50): Promise<string[]> {
  const rows = await q.execute<{ run_id: string }>(sql`
    update drover.verification_requests v set published_at = now()
     where v.run_id in (
       select run_id from drover.verification_requests
        where ((status = ${verificationStatus.pending} and not_before <= now())
            or (status = ${verificationStatus.running} and heartbeat_at < now() - make_interval(secs => ${VERIFICATION_STALE_MS / 1000})))
          and (published_at is null
            or published_at < now() - make_interval(secs => ${VERIFICATION_REPUBLISH_MS / 1000}))
        limit ${limit})
    returning v.run_id`);
  return rows.map((r) => r.run_id);
}

/**
 * Claims a request for one worker. Racers all issue this UPDATE: exactly one gets the row back. A
 * running request is taken over only when its heartbeat is stale, and only for the finish it was
 * asked for (a re-armed run is verified when it ends again).
 */
export async function claimVerification(
  q: Queryable,
  runId: string,
  workerId: string,
): Promise<VerificationClaim | undefined> {
  const [row] = await q.execute<{
    claim_token: string;
    generation: number;
    sample_size: number;
    attempts: number;
  }>(sql`
    update drover.verification_requests v
       set status = ${verificationStatus.running}, claim_token = gen_random_uuid(), claimed_by = ${workerId},
           heartbeat_at = now(), attempts = v.attempts + 1, updated_at = now()
     where v.run_id = ${runId}::uuid
       and ((v.status = ${verificationStatus.pending} and v.not_before <= now())
         or (v.status = ${verificationStatus.running}
             and v.heartbeat_at < now() - make_interval(secs => ${VERIFICATION_STALE_MS / 1000})))
       and exists (select 1 from drover.runs r
                    where r.id = v.run_id and r.status in ${FINISHED} and r.finished_at = v.for_finished_at)
    returning v.claim_token, v.generation, v.sample_size, v.attempts`);
  if (!row) return undefined;
  return {
    runId,
    token: row.claim_token,
    generation: row.generation,
    sampleSize: row.sample_size,
    attempts: row.attempts,
  };
}

/** Keeps the claim alive during a long source walk; false when it was lost (taken over or renewed). */
export async function touchVerification(q: Queryable, claim: VerificationClaim): Promise<boolean> {
  const rows = await q.execute(sql`
    update drover.verification_requests set heartbeat_at = now()
     where run_id = ${claim.runId}::uuid and claim_token = ${claim.token}::uuid
    returning 1`);
  return rows.length > 0;
}

/**
 * Stores the result on the run and closes the request, in one transaction, fenced twice: on the
 * claim (a worker that was given up on stores nothing) and on the finish it verified. Returns false
 * when the claim was lost.
 */
export async function storeVerification(
  db: Db,
  claim: VerificationClaim,
  result: VerificationResult,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const [closed] = await tx.execute<{ for_finished_at: string }>(sql`
      update drover.verification_requests
         set status = ${verificationStatus.done}, claim_token = null, heartbeat_at = null, last_error = ${result.error ?? null},
             updated_at = now()
       where run_id = ${claim.runId}::uuid and claim_token = ${claim.token}::uuid
      returning for_finished_at::text`);
    if (!closed) return false;
    await tx.execute(sql`
      update drover.runs set verification = ${JSON.stringify(storedVerificationJson(result))}::jsonb,
             updated_at = now()
       where id = ${claim.runId}::uuid and status in ${FINISHED}
         and finished_at = ${closed.for_finished_at}::timestamptz`);
    return true;
  });
}

/** A transient failure: the request waits `delayMs` and is published again by the leader's reaper. */
export async function deferVerification(
  q: Queryable,
  claim: VerificationClaim,
  reason: string,
  delayMs: number,
): Promise<void> {
  await q.execute(sql`
    update drover.verification_requests
       set status = ${verificationStatus.pending}, claim_token = null, claimed_by = null, heartbeat_at = null,
           not_before = now() + make_interval(secs => ${delayMs / 1000}), published_at = null,
           last_error = ${reason}, updated_at = now()
     where run_id = ${claim.runId}::uuid and claim_token = ${claim.token}::uuid`);
}

/**
 * The source's budget is walled off: the request waits for the wall (`until`, the reset the
 * refusal stated) like a parked task, and the attempt is not counted, so a verification waiting
 * for a daily budget is never stored as failed for having waited. Fenced on the claim.
 */
export async function parkVerification(
  q: Queryable,
  claim: VerificationClaim,
  reason: string,
  until: Date,
): Promise<void> {
  await q.execute(sql`
    update drover.verification_requests
       set status = ${verificationStatus.pending}, claim_token = null, claimed_by = null, heartbeat_at = null,
           not_before = greatest(${until.toISOString()}::timestamptz, now()), published_at = null,
           attempts = greatest(attempts - 1, 0), last_error = ${reason}, updated_at = now()
     where run_id = ${claim.runId}::uuid and claim_token = ${claim.token}::uuid`);
}

/** The worker is shutting down: the request goes back as it was, the attempt not counted. */
export async function handBackVerification(q: Queryable, claim: VerificationClaim): Promise<void> {
  await q.execute(sql`
    update drover.verification_requests
       set status = ${verificationStatus.pending}, claim_token = null, claimed_by = null, heartbeat_at = null,
           attempts = greatest(attempts - 1, 0), updated_at = now()
     where run_id = ${claim.runId}::uuid and claim_token = ${claim.token}::uuid`);
}

export interface VerificationRequestState {
  status: "pending" | "running" | "done";
  generation: number;
  attempts: number;
  lastError: string | null;
  /** When a pending request is due again (a deferral's backoff, a parked request's wall). */
  notBefore: Date;
}

export async function verificationRequestState(
  q: Queryable,
  runId: string,
): Promise<VerificationRequestState | undefined> {
  const [row] = await q.execute<{
    status: VerificationRequestState["status"];
    generation: number;
    attempts: number;
    last_error: string | null;
    not_before: string;
  }>(sql`
    select status, generation, attempts, last_error, not_before::text from drover.verification_requests
     where run_id = ${runId}::uuid`);
  return row
    ? {
        status: row.status,
        generation: row.generation,
        attempts: row.attempts,
        lastError: row.last_error,
        notBefore: new Date(row.not_before),
      }
    : undefined;
}

/**
 * The stored form of a result: the JSON mapping (proto field names) of drover.v1.Verification,
 * which GetRun parses back. Counts are written as strings, as that mapping writes 64-bit integers.
 */
export function storedVerificationJson(result: VerificationResult): Record<string, unknown> {
  return {
    ok: result.ok,
    verified_at: result.verifiedAt.toISOString(),
    ...(result.error ? { error: result.error } : {}),
    kinds: result.kinds.map((k) => ({
      kind: k.kind,
      source_count: String(k.sourceCount),
      ledger_count: String(k.ledgerCount),
      failed_count: String(k.failedCount),
      sampled: String(k.sampled),
      mismatches: k.mismatches,
    })),
  };
}
