import { randomUUID } from "node:crypto";
import type { SecretKeyring } from "@drover/auth";
import { FINISHED_RUN_STATUSES, type RunRow, runs } from "@drover/db";
import {
  admitRevertRun,
  describeDependent,
  findRevertDependents,
  RunAlreadyReverted,
  rearmRun,
  redriveRun,
  requestCutover,
  requestStop,
} from "@drover/engine";
import type { Run, RunService, ServiceImplementation } from "@drover/proto";
import type { Provider } from "@drover/provider-sdk";
import { injectTraceContext } from "@drover/telemetry";
import { eq } from "drizzle-orm";
import { admit } from "./admission.js";
import { requireActsFor } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { Precondition } from "./domain-errors.js";
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
 * Run control: start, stop, resume, retry, complete (a follow run's cutover), revert. Each checks
 * the caller and the request, moves the run through the engine's fenced transitions
 * (run-transitions), then advances it at once rather than waiting for the reaper.
 */
export function runControl(ctx: CoordinatorContext, secrets: SecretKeyring): RunControl {
  // A follow run's webhooks (run-webhooks.ts): the source is called after the answer, never inside it.
  const webhooks = new RunWebhooks(ctx, secrets);
  const inBackground = (what: string, runId: string, work: Promise<void>) =>
    void work.catch((err) => ctx.logger.warn({ err, run_id: runId }, `${what} failed`));
  const { db } = ctx;
  return {
    startRun: (req, call) =>
      startRun(ctx, secrets, req, call, (run, apiToken) =>
        inBackground("registering webhooks", run.id, webhooks.startFollowing(run, apiToken)),
      ),

    async stopRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      if (run.status === "succeeded" || run.status === "failed") {
        throw new Precondition(
          `run ${run.id} has already ${run.status}; only a running run can be stopped`,
          "RUN_NOT_RUNNING",
        );
      }
      if (await requestStop(db, run.id)) ctx.logger.info({ run_id: run.id }, "run stopping");
      if (run.follow) inBackground("removing webhooks", run.id, webhooks.stopFollowing(run.id));
      return advanced(ctx, run.id);
    },

    async resumeRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      await rearm(ctx, run, RESUME);
      if (run.follow && run.follow.cutoverAt === null)
        inBackground("registering webhooks again", run.id, webhooks.resumeFollowing(run));
      return advanced(ctx, run.id);
    },

    async retryRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      const filter = redriveFilter(req);
      if (filter) await redrive(ctx, run, filter);
      else await rearm(ctx, run, RETRY);
      return advanced(ctx, run.id);
    },

    async completeRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      if (!run.follow)
        throw new Precondition(
          `run ${run.id} does not follow its source (started without follow): it finishes by itself`,
          "RUN_NOT_FOLLOWING",
        );
      if (run.status === "succeeded" || run.status === "failed")
        throw new Precondition(`run ${run.id} has already ${run.status}`, "RUN_FINISHED");
      // A second call (or one racing another) finds the cutover asked for already: the same answer.
      if (await requestCutover(db, run.id)) ctx.logger.info({ run_id: run.id }, "follow run cutting over");
      // The final pass, begun after this call, reads what the webhooks would have said from here.
      inBackground("removing webhooks", run.id, webhooks.stopFollowing(run.id));
      return advanced(ctx, run.id);
    },

    revertRun: (req, call) => revertRun(ctx, req, call),
  };
}

/** Advances the run, then answers with it. */
async function advanced(ctx: CoordinatorContext, runId: string): Promise<{ run: Run }> {
  await advanceRun(ctx, runId);
  return { run: await runView(ctx.db, ctx.providers, (await loadRun(ctx.db, runId))!) };
}

type Handler<M extends keyof RunControl> = NonNullable<RunControl[M]>;

/** StartRun: the request checked field by field, the source's secret sealed, the run admitted. */
async function startRun(
  ctx: CoordinatorContext,
  secrets: SecretKeyring,
  req: Parameters<Handler<"startRun">>[0],
  call: Parameters<Handler<"startRun">>[1],
  /** A follow run that will call its source: its webhooks are registered after the answer. */
  followStarted: (run: RunRow, apiToken: string) => void,
): Promise<{ run: Run }> {
  const tenantId = requireTenant(req.tenantId);
  requireActsFor(call, tenantId);
  const p = requireProvider(ctx.providers, requireText("source", req.source, 64));
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
    throw invalid(`daily_share must be above 0 and at most 1 (a share of the account's day), got ${share}`);

  const follow = followOf(p, req.follow, req.followIntervalSeconds);

  const runId = randomUUID();
  const sealed = apiToken ? sealSourceSecret(secrets, runId, apiToken) : undefined;
  const plan = buildPlan(p, kinds);
  const run = await admit(ctx.db, p, {
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
  if (follow && apiToken && !req.dryRun) followStarted(run, apiToken);
  return advanced(ctx, run.id);
}

/**
 * A revert is a run of its own (engine revert.ts). Refused, naming what stands in the way,
 * while the run is live, when it is itself a revert, when it was reverted already, and when
 * another run's records link to (or matched) records it created, unless force.
 */
async function revertRun(
  ctx: CoordinatorContext,
  ...[req, call]: Parameters<Handler<"revertRun">>
): Promise<{ run: Run }> {
  const { db } = ctx;
  const target = await loadVisibleRun(db, req.runId, call);
  if (target.revertsRunId)
    throw new Precondition(
      `run ${target.id} is itself the revert of run ${target.revertsRunId}; a revert cannot be reverted`,
      "REVERT_OF_REVERT",
    );
  if (!(FINISHED_RUN_STATUSES as readonly string[]).includes(target.status))
    throw new Precondition(
      `run ${target.id} is ${target.status}; stop it (or let it finish) before reverting it`,
      "RUN_NOT_FINISHED",
    );
  const p = requireProvider(ctx.providers, target.source);
  if (!p.productRecords || (p.ledger ?? "per-row") !== "per-row")
    throw new Precondition(
      `source ${target.source} keeps no record of what its runs created; its runs cannot be reverted`,
      "SOURCE_CANNOT_REVERT",
    );
  const existing = await revertOf(ctx, target.id);
  if (existing) throw new RunAlreadyReverted(target.id, existing);
  const shown = 10;
  const dependents = await findRevertDependents(db, p.productRecords, target, { limit: shown + 1 });
  if (dependents.length > 0 && !req.force) {
    const named = dependents
      .slice(0, shown)
      .map((d) => `${d.parentType} ${d.parentId}: ${describeDependent(d)}`);
    throw new Precondition(
      `other runs' records depend on records run ${target.id} created: ${named.join("; ")}${
        dependents.length > shown ? "; and more" : ""
      }. Revert with force to clear those links (each is noted on the revert run)`,
      "DEPENDENT_RECORDS",
      { run_ids: [...new Set(dependents.map((d) => d.runId))].join(",") },
    );
  }
  // Refused by the engine when another revert won the race (RunAlreadyReverted) or the account
  // has a live run (LiveRunConflict); the edge says which (rpc-status.ts).
  const run = await admitRevertRun(db, target, {
    id: randomUUID(),
    force: req.force,
    traceContext: injectTraceContext(),
  });
  ctx.logger.info(
    { run_id: run.id, reverts: target.id, force: req.force, dependents: dependents.length },
    "revert started",
  );
  return advanced(ctx, run.id);
}

/**
 * Resume and retry are one transition: a run in the right state gets its cancelled (resume) or
 * failed (retry) tasks back as pending, and its barrier rewound to the lowest of them.
 */
async function rearm(ctx: CoordinatorContext, run: RunRow, how: Rearm): Promise<void> {
  const { db } = ctx;
  if (run.status !== how.from) throw notRearmable(run, how);
  if (run.summary) throw prunedError(run.id);
  await refuseReverted(ctx, run);
  // A live run of the same account refuses it (LiveRunConflict: ALREADY_EXISTS at the edge).
  const moved = await rearmRun(db, run.id, how);
  // Another call moved it between the read and the fenced transition.
  if (!moved) throw notRearmable((await loadRun(db, run.id)) ?? run, how);
}

/**
 * Re-drive: the filter's rows go back to the source in tasks of the run's last phase, the run
 * running again until they end (redriveRun).
 */
async function redrive(ctx: CoordinatorContext, run: RunRow, filter: RedriveFilter): Promise<void> {
  const { db } = ctx;
  if (run.summary) throw prunedError(run.id);
  await refuseReverted(ctx, run);
  const plan = await planRedrive(
    db,
    ctx.providers,
    requireProvider(ctx.providers, run.source),
    run,
    filter,
    randomUUID(),
  );
  const moved = await redriveRun(db, run.id, plan.seeds);
  // Another call moved it between the read and the fenced transition.
  if (!moved) {
    const now = (await loadRun(db, run.id)) ?? run;
    if (now.summary) throw prunedError(run.id);
    throw new Precondition(
      `run ${run.id} is ${now.status}; only a finished run (succeeded or failed) can be re-driven`,
      "RUN_NOT_FINISHED",
    );
  }
  ctx.logger.info(
    { run_id: run.id, rows: plan.rows, tasks: plan.seeds.length, kind: filter.kind, reason: filter.reason },
    "run re-driven",
  );
}

/** A reverted run's records were removed on purpose: running it again, or part of it, would bring them back. */
async function refuseReverted(ctx: CoordinatorContext, run: RunRow): Promise<void> {
  const by = await revertOf(ctx, run.id);
  if (by)
    throw new Precondition(
      `run ${run.id} was reverted by run ${by}; start a new run to import again`,
      "RUN_REVERTED",
      { reverted_by: by },
    );
}

async function revertOf(ctx: CoordinatorContext, runId: string): Promise<string | undefined> {
  const [by] = await ctx.db.select({ id: runs.id }).from(runs).where(eq(runs.revertsRunId, runId));
  return by?.id;
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

function notRearmable(run: RunRow, how: Rearm): Precondition {
  if (run.summary) return prunedError(run.id);
  return new Precondition(
    `run ${run.id} is ${run.status}; only a ${how.from} run can be ${how.verb}`,
    how.from === "stopped" ? "RUN_NOT_STOPPED" : "RUN_NOT_FAILED",
  );
}
