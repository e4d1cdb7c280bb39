import { randomUUID } from "node:crypto";
import type { SecretKeyring } from "@drover/auth";
import { FINISHED_RUN_STATUSES, pgErrorCode, type RunRow, runs } from "@drover/db";
import {
  admitRevertRun,
  describeDependent,
  findRevertDependents,
  rearmRun,
  redriveRun,
  requestCutover,
  requestStop,
} from "@drover/engine";
import { Code, RpcError, type Run, type RunService, type ServiceImplementation } from "@drover/proto";
import type { Provider } from "@drover/provider-sdk";
import { injectTraceContext } from "@drover/telemetry";
import { eq } from "drizzle-orm";
import { admit, conflict } from "./admission.js";
import { requireActsFor } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { buildPlan } from "./plan.js";
import { loadVisibleRun, prunedError } from "./run-access.js";
import { advanceRun } from "./run-advance.js";
import { planRedrive, type RedriveFilter, redriveFilter } from "./run-redrive.js";
import { loadRun, runView } from "./run-view.js";
import { RunWebhooks } from "./run-webhooks.js";
import { sealSourceSecret } from "./source-secrets.js";
import {
  invalid,
  optionalText,
  requireProvider,
  requireSettings,
  requireTenant,
  requireText,
  requireToken,
  requireUserKinds,
} from "./validation.js";

type RunControl = Pick<
  ServiceImplementation<typeof RunService>,
  "startRun" | "stopRun" | "resumeRun" | "retryRun" | "completeRun" | "revertRun"
>;

/** A follow pass every five minutes unless the start asks otherwise. */
export const DEFAULT_FOLLOW_INTERVAL_SECONDS = 300;
/** A day: a longer interval would leave the product a day behind its source. */
const MAX_FOLLOW_INTERVAL_SECONDS = 86_400;

/**
 * Run control: start, stop, resume, retry, complete (a follow run's cutover), revert. Each checks the caller and the request, moves the run
 * through the engine's fenced transitions (run-transitions), then advances it at once rather than
 * waiting for the reaper.
 */
export function runControl(ctx: CoordinatorContext, secrets: SecretKeyring): RunControl {
  // A follow run's webhooks (run-webhooks.ts): the source is called after the answer, never inside it.
  const webhooks = new RunWebhooks(ctx, secrets);
  const inBackground = (what: string, runId: string, work: Promise<void>) =>
    void work.catch((err) => ctx.logger.warn({ err, run_id: runId }, `${what} failed`));
  const { db } = ctx;

  const provider = (name: string): Provider => requireProvider(ctx.providers, name);

  /** Advances the run, then answers with it. */
  const advanced = async (runId: string): Promise<{ run: Run }> => {
    await advanceRun(ctx, runId);
    return { run: await runView(db, ctx.providers, (await loadRun(db, runId))!) };
  };

  /**
   * Resume and retry are one transition: a run in the right state gets its cancelled (resume) or
   * failed (retry) tasks back as pending, and its barrier rewound to the lowest of them.
   */
  const rearm = async (run: RunRow, how: Rearm): Promise<void> => {
    if (run.status !== how.from) throw notRearmable(run, how);
    if (run.summary) throw prunedError(run.id);
    await refuseReverted(run);
    let moved: boolean;
    try {
      moved = await rearmRun(db, run.id, how);
    } catch (err) {
      if (pgErrorCode(err) === "23505") throw await conflict(db, run, run.id);
      throw err;
    }
    // Another call moved it between the read and the fenced transition.
    if (!moved) throw notRearmable((await loadRun(db, run.id)) ?? run, how);
  };

  /**
   * Re-drive: the filter's rows go back to the source in tasks of the run's last phase, the run
   * running again until they end (redriveRun).
   */
  const redrive = async (run: RunRow, filter: RedriveFilter): Promise<void> => {
    if (run.summary) throw prunedError(run.id);
    await refuseReverted(run);
    const plan = await planRedrive(db, ctx.providers, provider(run.source), run, filter, randomUUID());
    let moved: boolean;
    try {
      moved = await redriveRun(db, run.id, plan.seeds);
    } catch (err) {
      if (pgErrorCode(err) === "23505") throw await conflict(db, run, run.id);
      throw err;
    }
    // Another call moved it between the read and the fenced transition.
    if (!moved) {
      const now = (await loadRun(db, run.id)) ?? run;
      if (now.summary) throw prunedError(run.id);
      throw new RpcError(
        Code.FAILED_PRECONDITION,
        `run ${run.id} is ${now.status}; only a finished run (succeeded or failed) can be re-driven`,
      );
    }
    ctx.logger.info(
      { run_id: run.id, rows: plan.rows, tasks: plan.seeds.length, kind: filter.kind, reason: filter.reason },
      "run re-driven",
    );
  };

  /** A reverted run's records were removed on purpose: running it again, or part of it, would bring them back. */
  const refuseReverted = async (run: RunRow): Promise<void> => {
    const by = await revertOf(run.id);
    if (by)
      throw new RpcError(
        Code.FAILED_PRECONDITION,
        `run ${run.id} was reverted by run ${by}; start a new run to import again`,
        { reverted_by: by },
      );
  };

  const revertOf = async (runId: string): Promise<string | undefined> => {
    const [by] = await db.select({ id: runs.id }).from(runs).where(eq(runs.revertsRunId, runId));
    return by?.id;
  };

  return {
    async startRun(req, call) {
      const tenantId = requireTenant(req.tenantId);
      requireActsFor(call, tenantId);
      const p = provider(requireText("source", req.source, 64));
      const sourceAccount = requireText("source_account", req.sourceAccount, 256);
      const kinds = requireUserKinds(p, req.kinds);
      const config = req.sourceConfig;
      const baseUrl = optionalText("source_config.base_url", config?.baseUrl ?? "", 2048);
      const apiToken = requireToken("source_config.api_token", config?.apiToken ?? "", 4096);
      const settings = requireSettings("source_config.settings", config?.settings ?? {});
      const problem = p.validateConfig({ baseUrl, apiToken, settings });
      if (problem) throw invalid(`source_config: ${problem}`);
      const share = req.dailyShare;
      if (share !== undefined && !(Number.isFinite(share) && share > 0 && share <= 1))
        throw invalid(
          `daily_share must be above 0 and at most 1 (a share of the account's day), got ${share}`,
        );

      const follow = followOf(p, req.follow, req.followIntervalSeconds);

      const runId = randomUUID();
      const sealed = apiToken ? sealSourceSecret(secrets, runId, apiToken) : undefined;
      const plan = buildPlan(p, kinds);
      const run = await admit(db, p, {
        id: runId,
        tenantId,
        source: p.name,
        sourceAccount,
        kinds: plan.flat(),
        plan,
        sourceConfig: { baseUrl, settings },
        sourceSecretCiphertext: sealed?.ciphertext ?? null,
        sourceSecretKeyId: sealed?.keyId ?? null,
        traceContext: injectTraceContext(),
        dailyShare: share ?? null,
        ...(follow ? { follow } : {}),
        dryRun: req.dryRun,
      });
      ctx.logger.info(
        { run_id: run.id, tenant_id: tenantId, source: p.name, kinds, dry_run: req.dryRun },
        req.dryRun ? "dry run started" : "run started",
      );
      if (follow && apiToken && !req.dryRun)
        inBackground("registering webhooks", run.id, webhooks.startFollowing(run, apiToken));
      return advanced(run.id);
    },

    async stopRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      if (run.status === "succeeded" || run.status === "failed") {
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `run ${run.id} has already ${run.status}; only a running run can be stopped`,
        );
      }
      if (await requestStop(db, run.id)) ctx.logger.info({ run_id: run.id }, "run stopping");
      if (run.follow) inBackground("removing webhooks", run.id, webhooks.stopFollowing(run.id));
      return advanced(run.id);
    },

    async resumeRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      await rearm(run, RESUME);
      if (run.follow && run.follow.cutoverAt === null)
        inBackground("registering webhooks again", run.id, webhooks.resumeFollowing(run));
      return advanced(run.id);
    },

    async retryRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      const filter = redriveFilter(req);
      if (filter) {
        await redrive(run, filter);
        return advanced(run.id);
      }
      await rearm(run, RETRY);
      return advanced(run.id);
    },

    async completeRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      if (!run.follow)
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `run ${run.id} does not follow its source (started without follow): it finishes by itself`,
        );
      if (run.status === "succeeded" || run.status === "failed")
        throw new RpcError(Code.FAILED_PRECONDITION, `run ${run.id} has already ${run.status}`);
      // A second call (or one racing another) finds the cutover asked for already: the same answer.
      if (await requestCutover(db, run.id)) ctx.logger.info({ run_id: run.id }, "follow run cutting over");
      // The final pass, begun after this call, reads what the webhooks would have said from here.
      inBackground("removing webhooks", run.id, webhooks.stopFollowing(run.id));
      return advanced(run.id);
    },

    /**
     * A revert is a run of its own (engine revert.ts). Refused, naming what stands in the way,
     * while the run is live, when it is itself a revert, when it was reverted already, and when
     * another run's records link to (or matched) records it created, unless force.
     */
    async revertRun(req, call) {
      const target = await loadVisibleRun(db, req.runId, call);
      if (target.revertsRunId)
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `run ${target.id} is itself the revert of run ${target.revertsRunId}; a revert cannot be reverted`,
        );
      if (!(FINISHED_RUN_STATUSES as readonly string[]).includes(target.status))
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `run ${target.id} is ${target.status}; stop it (or let it finish) before reverting it`,
        );
      const p = provider(target.source);
      if (!p.productRecords || (p.ledger ?? "per-row") !== "per-row")
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `source ${target.source} keeps no record of what its runs created; its runs cannot be reverted`,
        );
      const existing = await revertOf(target.id);
      if (existing) throw alreadyReverted(target.id, existing);
      const shown = 10;
      const dependents = await findRevertDependents(db, p.productRecords, target, { limit: shown + 1 });
      if (dependents.length > 0 && !req.force) {
        const named = dependents
          .slice(0, shown)
          .map((d) => `${d.parentType} ${d.parentId}: ${describeDependent(d)}`);
        throw new RpcError(
          Code.FAILED_PRECONDITION,
          `other runs' records depend on records run ${target.id} created: ${named.join("; ")}${
            dependents.length > shown ? "; and more" : ""
          }. Revert with force to clear those links (each is noted on the revert run)`,
          { run_ids: [...new Set(dependents.map((d) => d.runId))].join(",") },
        );
      }
      let run: RunRow;
      try {
        run = await admitRevertRun(db, target, {
          id: randomUUID(),
          force: req.force,
          traceContext: injectTraceContext(),
        });
      } catch (err) {
        if (pgErrorCode(err) !== "23505") throw err;
        const racing = await revertOf(target.id);
        throw racing ? alreadyReverted(target.id, racing) : await conflict(db, target);
      }
      ctx.logger.info(
        { run_id: run.id, reverts: target.id, force: req.force, dependents: dependents.length },
        "revert started",
      );
      return advanced(run.id);
    },
  };
}

/**
 * A start's follow request: nothing unless follow is set, an interval only with it, and a source
 * whose plan closes with a catch-up pass (the pass a follow run repeats).
 */
function followOf(
  p: Provider,
  follow: boolean,
  intervalSeconds: number | undefined,
): { intervalSeconds: number } | undefined {
  if (!follow) {
    if (intervalSeconds !== undefined)
      throw invalid("follow_interval_seconds is set but follow is not: set follow to follow the source");
    return undefined;
  }
  if ((p.closingKinds ?? []).length === 0)
    throw invalid(`source "${p.name}" has no catch-up pass, so a run of it cannot follow the source`);
  const seconds = intervalSeconds ?? DEFAULT_FOLLOW_INTERVAL_SECONDS;
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_FOLLOW_INTERVAL_SECONDS)
    throw invalid(
      `follow_interval_seconds must be a whole number of seconds from 1 to ${MAX_FOLLOW_INTERVAL_SECONDS}, got ${seconds}`,
    );
  return { intervalSeconds: seconds };
}

interface Rearm {
  from: "stopped" | "failed";
  tasksFrom: "cancelled" | "failed";
  /** Retry starts the failed tasks' attempts afresh; resume keeps what was spent. */
  resetAttempts: boolean;
  verb: string;
}

const RESUME: Rearm = { from: "stopped", tasksFrom: "cancelled", resetAttempts: false, verb: "resumed" };
const RETRY: Rearm = { from: "failed", tasksFrom: "failed", resetAttempts: true, verb: "retried" };

function alreadyReverted(runId: string, by: string): RpcError {
  return new RpcError(
    Code.FAILED_PRECONDITION,
    `run ${runId} is already reverted by run ${by}; resume or retry that run if it did not finish`,
    { reverted_by: by },
  );
}

function notRearmable(run: RunRow, how: Rearm): RpcError {
  if (run.summary) return prunedError(run.id);
  return new RpcError(
    Code.FAILED_PRECONDITION,
    `run ${run.id} is ${run.status}; only a ${how.from} run can be ${how.verb}`,
  );
}
