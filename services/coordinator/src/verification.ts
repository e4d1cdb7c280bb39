import type { SecretKeyring } from "@drover/auth";
import type { RunRow } from "@drover/db";
import { openSourceSecret, type VerificationResult, verifyRun } from "@drover/engine";
import {
  type CallContext,
  type Client,
  Code,
  create,
  createClient,
  fromJson,
  RpcError,
  RunService,
  timestampFromDate,
  toJson,
  type Verification,
  VerificationSchema,
} from "@drover/proto";
import {
  type CallType,
  classifyError,
  describeError,
  type Pacer,
  RateLimitedError,
  sleep,
  TOKEN_COSTS,
  TransientError,
} from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { forwardedCredentials } from "./auth.js";
import { DEFAULT_BUDGET_OPTIONS } from "./budget-keeper.js";
import type { CoordinatorContext } from "./context.js";
import { leaderAddress } from "./leader-lease.js";
import { loadRun } from "./run-view.js";

/** Runs that finished longer ago than this are verified only on demand (e.g. runs from before verification existed). */
const AUTOMATIC_WITHIN_MS = 48 * 3_600_000;
/** Transient failures (the source unreachable, leadership moving) before the error itself is stored. */
const MAX_FAILURES = 5;
/** Marks a VerifyRun already forwarded to the leader, so two coordinators never bounce it. */
const FORWARDED = "x-drover-forwarded";

/**
 * Verification of finished runs (engine verifyRun), stored on the run and shown by GetRun.
 *
 * - Automatically: the leader's reaper pass calls kick(), which verifies finished runs whose
 *   verification is null in the background, one at a time, so the RPCs and the reaper never wait
 *   on a source walk. A transient failure is retried with backoff; after MAX_FAILURES, or at once
 *   for a permanent one, the failure is stored as the verification's error.
 * - On demand: VerifyRun verifies now and answers with the result, sharing a verification of the
 *   same run already in progress.
 *
 * Verification runs on the leader only, because that is where the source budget lives: its calls
 * take their slots from the same BudgetKeeper the workers lease from. A follower forwards VerifyRun
 * to the leader with the caller's own credentials.
 */
export class Verifications {
  private readonly inFlight = new Map<string, Promise<Verification>>();
  private readonly failures = new Map<string, { count: number; notBefore: number }>();
  private readonly abort = new AbortController();
  private background: Promise<void> | undefined;
  private leaderClient: { address: string; client: Client<typeof RunService> } | undefined;

  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly secrets: SecretKeyring | undefined,
  ) {}

  /** Verifies finished, unverified runs in the background, one at a time; a no-op when busy or not leading. */
  kick(): void {
    if (this.background || this.abort.signal.aborted || !this.ctx.isLeader()) return;
    this.background = this.drain()
      .catch((err) => {
        if (!this.abort.signal.aborted) this.ctx.logger.error({ err }, "verifying finished runs failed");
      })
      .finally(() => {
        this.background = undefined;
      });
  }

  /** Waits for the background verification to end (it is aborted). */
  async stop(): Promise<void> {
    this.abort.abort(new Error("the coordinator is stopping"));
    this.leaderClient?.client.close();
    await this.background;
    await Promise.allSettled(this.inFlight.values());
  }

  /**
   * VerifyRun: the run's verification, made now. A transient failure answers UNAVAILABLE and
   * stores nothing; a permanent one is stored and returned as the verification's error.
   */
  async onDemand(run: RunRow, call: CallContext): Promise<Verification> {
    if (!this.ctx.isLeader()) return this.forward(run.id, call);
    try {
      return await this.verify(run, call.signal);
    } catch (err) {
      if (call.signal.aborted) throw err;
      if (err instanceof RpcError) throw err;
      throw new RpcError(
        Code.UNAVAILABLE,
        `run ${run.id} could not be verified now: ${describeError(err)}; try again shortly`,
      );
    }
  }

  private async drain(): Promise<void> {
    while (!this.abort.signal.aborted && this.ctx.isLeader()) {
      const now = Date.now();
      const waiting = [...this.failures].filter(([, f]) => f.notBefore > now).map(([id]) => id);
      const [row] = await this.ctx.db.execute<{ id: string }>(sql`
        select id from drover.runs
         where status in ('succeeded', 'failed') and verification is null and summary is null
           and finished_at > now() - make_interval(secs => ${AUTOMATIC_WITHIN_MS / 1000})
           and not (id = any(${sql.param(waiting)}::uuid[]))
         order by finished_at limit 1`);
      if (!row) return;
      const run = await loadRun(this.ctx.db, row.id);
      if (!run) continue;
      try {
        await this.verify(run, this.abort.signal);
        this.failures.delete(run.id);
      } catch (err) {
        if (this.abort.signal.aborted) return;
        const failure = this.failures.get(run.id) ?? { count: 0, notBefore: 0 };
        failure.count++;
        failure.notBefore = Date.now() + Math.min(5_000 * 2 ** failure.count, 300_000);
        this.failures.set(run.id, failure);
        this.ctx.logger.warn(
          { run_id: run.id, attempt: failure.count, reason: describeError(err) },
          "verification failed; trying again later",
        );
        if (failure.count >= MAX_FAILURES) {
          await this.store(run, errorResult(err));
          this.failures.delete(run.id);
        }
      }
    }
  }

  /** Verifies and stores; a permanent failure is stored as the result, anything else thrown. */
  private verify(run: RunRow, signal: AbortSignal): Promise<Verification> {
    const running = this.inFlight.get(run.id);
    if (running) return running;
    const job = (async () => {
      const provider = this.ctx.providers.get(run.source);
      let result: VerificationResult;
      try {
        if (!provider)
          throw new RpcError(Code.FAILED_PRECONDITION, `run ${run.id} uses unknown source "${run.source}"`);
        const secret = openSourceSecret(run, this.secrets);
        const pacer = new LeaderBudgetPacer(this.ctx, run.source, run.sourceAccount);
        result = await verifyRun(this.ctx.db, provider, run, {
          sampleSize: this.ctx.config.DROVER_VERIFY_SAMPLE_SIZE,
          pacer,
          secret,
          signal: AbortSignal.any([signal, this.abort.signal]),
        });
      } catch (err) {
        const cls = classifyError(err);
        if (signal.aborted || this.abort.signal.aborted || cls === "transient" || cls === "rate_limited")
          throw err;
        result = errorResult(err);
      }
      const verification = await this.store(run, result);
      const mismatches = result.kinds.reduce((n, k) => n + k.mismatches.length, 0);
      this.ctx.logger.info(
        { run_id: run.id, ok: result.ok, mismatches, error: result.error },
        result.ok ? "run verified" : "run verified with mismatches",
      );
      return verification;
    })().finally(() => this.inFlight.delete(run.id));
    this.inFlight.set(run.id, job);
    return job;
  }

  /**
   * Stores the result on the run, fenced on the run still being the finished run that was
   * verified: one that was retried or resumed meanwhile finishes again later, and is verified then.
   */
  private async store(run: RunRow, result: VerificationResult): Promise<Verification> {
    const verification = toProtoVerification(result);
    const json = JSON.stringify(toJson(VerificationSchema, verification, { useProtoFieldName: true }));
    // finished_at has microseconds, the loaded Date milliseconds: the finish is the one in that millisecond.
    const finished = (run.finishedAt ?? new Date(0)).toISOString();
    await this.ctx.db.execute(sql`
      update drover.runs set verification = ${json}::jsonb, updated_at = now()
       where id = ${run.id}::uuid and status in ('succeeded', 'failed', 'stopped')
         and finished_at >= ${finished}::timestamptz
         and finished_at < ${finished}::timestamptz + interval '1 millisecond'`);
    return verification;
  }

  private async forward(runId: string, call: CallContext): Promise<Verification> {
    if (call.metadata[FORWARDED])
      throw new RpcError(Code.UNAVAILABLE, "leadership is moving between coordinators; retry shortly");
    const address = await leaderAddress(this.ctx.db);
    if (!address) throw new RpcError(Code.UNAVAILABLE, "no coordinator leads yet; retry shortly");
    if (this.leaderClient?.address !== address) {
      this.leaderClient?.client.close();
      this.leaderClient = {
        address,
        client: createClient(
          RunService,
          address,
          this.ctx.clientCredentials ? { credentials: this.ctx.clientCredentials } : {},
        ),
      };
    }
    const { verification } = await this.leaderClient.client.verifyRun(
      { runId },
      {
        signal: call.signal,
        ...(call.deadline ? { deadline: call.deadline } : {}),
        metadata: { ...forwardedCredentials(call), [FORWARDED]: "1" },
      },
    );
    return verification ?? create(VerificationSchema, {});
  }
}

function errorResult(err: unknown): VerificationResult {
  return { ok: false, verifiedAt: new Date(), kinds: [], error: describeError(err) };
}

export function toProtoVerification(result: VerificationResult): Verification {
  return create(VerificationSchema, {
    ok: result.ok,
    verifiedAt: timestampFromDate(result.verifiedAt),
    error: result.error ?? "",
    kinds: result.kinds.map((k) => ({
      kind: k.kind,
      sourceCount: BigInt(k.sourceCount),
      ledgerCount: BigInt(k.ledgerCount),
      failedCount: BigInt(k.failedCount),
      sampled: BigInt(k.sampled),
      mismatches: k.mismatches,
    })),
  });
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

/** Slots leased at once, at most. */
const MAX_LEASE = 32;
/** What a source that sends no rate-limit headers is paced at, per burst window (as the workers assume). */
const UNLIMITED = 100_000;

/**
 * Verification's share of the source account's budget: slots leased from the leader's BudgetKeeper,
 * exactly as the workers lease theirs over WorkerService, and what the source's headers say handed
 * back to it. Only valid on the leader: a coordinator that loses the lease stops leasing (the
 * verification fails transiently and the new leader does it again).
 */
export class LeaderBudgetPacer implements Pacer {
  readonly graceMs = DEFAULT_BUDGET_OPTIONS.graceMs;
  private slots: number[] = [];
  private leasing: Promise<void> | undefined;
  private blockedUntil = 0;
  private capacity: number | undefined;
  /** Slots asked for and not yet handed out. */
  private waiting = 0;

  constructor(
    private readonly ctx: Pick<CoordinatorContext, "budgets" | "isLeader" | "logger">,
    private readonly source: string,
    private readonly account: string,
  ) {}

  async acquire(type: CallType, signal?: AbortSignal, count = 1): Promise<number[]> {
    const out: number[] = [];
    this.waiting += count;
    try {
      while (out.length < count) {
        signal?.throwIfAborted();
        const usableFrom = Date.now() - this.graceMs + 5;
        while (this.slots.length > 0 && this.slots[0]! < usableFrom) this.slots.shift();
        if (this.slots.length > 0) {
          out.push(this.slots.shift()!);
          this.waiting--;
          continue;
        }
        // One lease for every call waiting now (verification fetches side by side): slots start a
        // little ahead of the lease, and leasing them one by one would serialise the calls on it.
        this.leasing ??= this.lease(Math.min(Math.max(1, this.waiting), MAX_LEASE), type, signal).finally(
          () => {
            this.leasing = undefined;
          },
        );
        await this.leasing;
      }
      return out;
    } finally {
      this.waiting -= count - out.length;
    }
  }

  absorb(headers: Headers, status: number, type: CallType): void {
    const reading: Parameters<CoordinatorContext["budgets"]["report"]>[2] = { spent: 0 };
    const limit =
      intHeader(headers, "x-ratelimit-limit") ?? (status >= 200 && status < 300 ? UNLIMITED : undefined);
    if (limit !== undefined && limit > 0 && limit !== this.capacity) {
      this.capacity = limit;
      reading.burstCapacity = limit;
    }
    const daily = intHeader(headers, "x-daily-ratelimit-token-remaining");
    if (daily !== undefined) reading.dailyRemaining = daily;
    if (status === 429) {
      const reset = Math.max(1, intHeader(headers, "x-ratelimit-reset") ?? 2);
      this.blockedUntil = Math.max(this.blockedUntil, Date.now() + reset * 1000);
      this.slots = this.slots.filter((t) => t >= this.blockedUntil);
      reading.blockedUntil = new Date(this.blockedUntil);
    } else if (status > 0 && status < 500) {
      reading.spent = TOKEN_COSTS[type];
    }
    if (!this.ctx.isLeader()) return;
    this.ctx.budgets
      .report(this.source, this.account, reading)
      .catch((err) => this.ctx.logger.warn({ err }, "recording a verification call in the budget failed"));
  }

  private async lease(want: number, type: CallType, signal?: AbortSignal): Promise<void> {
    if (!this.ctx.isLeader())
      throw new TransientError("this coordinator no longer leads; the source budget is kept by the leader");
    if (this.blockedUntil > Date.now()) await sleep(this.blockedUntil - Date.now(), signal);
    const result = await this.ctx.budgets.lease(this.source, this.account, want, TOKEN_COSTS[type]);
    if (result.kind === "granted") {
      for (let i = 0; i < result.granted; i++) this.slots.push(result.firstSlotAt + i * result.intervalMs);
      return;
    }
    if (result.kind === "exhausted") {
      throw new RateLimitedError(
        `the daily allowance of ${this.source}:${this.account} is used up`,
        new Date(result.retryAt),
      );
    }
    await sleep(Math.max(0, result.retryAt - Date.now()), signal);
  }
}

function intHeader(headers: Headers, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null) return undefined;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) ? n : undefined;
}
