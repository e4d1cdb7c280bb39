import { leaderAddress } from "@drover/db";
import {
  BudgetExhausted_Scope,
  type Client,
  createClient,
  readBudgetReport,
  type ServiceImplementation,
  timestampFromDate,
  WorkerService,
} from "@drover/proto";
import { forwardedCredentials } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { Unavailable } from "./domain-errors.js";
import { advanceRun } from "./run-advance.js";
import { checkTaskReport } from "./task-report.js";
import { invalid, requireText } from "./validation.js";

/**
 * What workers tell the coordinator, and the source budget they lease from it.
 * TaskFinished is only a shortcut: the reaper finds the same facts in the database a few seconds
 * later, so nothing is lost when a call never arrives. Budgets live in the leader's memory; a
 * coordinator that does not lead forwards budget calls to the one that does.
 */
export function workerService(ctx: CoordinatorContext): ServiceImplementation<typeof WorkerService> {
  const forward = leaderForwarder(ctx);
  return {
    async taskFinished(req) {
      const report = await checkTaskReport(ctx.db, req, ctx.logger);
      await advanceRun(ctx, report.runId);
      return {};
    },

    /** Read from this coordinator's own configuration: every coordinator must carry the same values. */
    async getSettings() {
      const c = ctx.config;
      return {
        laneWidth: c.laneWidth,
        maxAttempts: c.maxAttempts,
        queuePrefix: c.queuePrefix,
        notesCap: c.notesCap,
        staleTaskMs: c.staleTaskMs,
      };
    },

    async leaseBudget(req, call) {
      const source = requireText("source", req.source, 64);
      const account = requireText("source_account", req.sourceAccount, 256);
      if (req.want < 1 || req.want > 1_000) throw invalid("want must be between 1 and 1000");
      if (req.tokensPerSlot < 0 || req.tokensPerSlot > 10_000)
        throw invalid("tokens_per_slot must be between 0 and 10000");
      if (req.burstWindowMs < 0 || req.burstWindowMs > 86_400_000)
        throw invalid("burst_window_ms must be between 0 (unknown) and 86400000");
      if (req.runId.length > 64) throw invalid("run_id must be a run's id (at most 64 characters)");
      const report = req.report ? readBudgetReport(req.report) : undefined;
      if (report && "problem" in report) throw invalid(`report: ${report.problem}`);
      if (!ctx.isLeader())
        return (await forward()).leaseBudget(req, {
          signal: call.signal,
          deadline: new Date(Date.now() + 5_000),
          // The leader checks the worker's own credential.
          metadata: forwardedCredentials(call),
        });
      // What the worker read from the source's answers counts before the lease is decided.
      if (report) await ctx.budgets.report(source, account, report, req.runId);
      const result = await ctx.budgets.lease(
        source,
        account,
        req.want,
        req.tokensPerSlot,
        req.burstWindowMs,
        req.runId,
        req.workerId,
      );
      const applied = { reportApplied: report !== undefined };
      // A spent day is an answer, not a failure: the lease says so in its own fields.
      if (result.kind === "exhausted") {
        const until = result.retryAt.toISOString();
        return {
          ...applied,
          granted: 0,
          retryAt: timestampFromDate(result.retryAt),
          exhausted: {
            scope: result.share ? BudgetExhausted_Scope.RUN : BudgetExhausted_Scope.ACCOUNT,
            reason: result.share
              ? `run ${req.runId} has spent its daily share of ${source}:${account} until ${until}`
              : `the daily allowance of ${source}:${account} is used up until ${until}`,
          },
        };
      }
      if (result.kind === "wait")
        return { granted: 0, retryAt: timestampFromDate(result.retryAt), ...applied };
      return {
        ...applied,
        granted: result.granted,
        firstSlotAt: timestampFromDate(new Date(result.firstSlotAt)),
        intervalMs: result.intervalMs,
        graceMs: result.graceMs,
      };
    },

    async reportBudget(req, call) {
      const source = requireText("source", req.source, 64);
      const account = requireText("source_account", req.sourceAccount, 256);
      const report = readBudgetReport(req);
      if ("problem" in report) throw invalid(report.problem);
      if (!ctx.isLeader())
        return (await forward()).reportBudget(req, {
          signal: call.signal,
          deadline: new Date(Date.now() + 5_000),
          // The leader checks the worker's own credential.
          metadata: forwardedCredentials(call),
        });
      await ctx.budgets.report(source, account, report, req.runId);
      return {};
    },
  };
}

/**
 * A client to the current leader, re-read at most every two seconds, and by one call at a time:
 * when the cached address went stale under a busy follower, every forwarded call read the
 * leadership row itself (seven reads a second on a follower forwarding a hundred runs' leases).
 */
function leaderForwarder(ctx: CoordinatorContext): () => Promise<Client<typeof WorkerService>> {
  let cached: { address: string; client: Client<typeof WorkerService>; at: number } | undefined;
  let reading: Promise<Client<typeof WorkerService>> | undefined;
  const read = async () => {
    const address = await leaderAddress(ctx.db);
    if (!address) throw new Unavailable("no coordinator leads yet; retry shortly", "NO_LEADER", 1_000);
    if (cached?.address !== address) {
      cached?.client.close();
      cached = {
        address,
        client: createClient(WorkerService, address, { credentials: ctx.clientCredentials }),
        at: Date.now(),
      };
    } else cached.at = Date.now();
    return cached.client;
  };
  return async () => {
    if (cached && Date.now() - cached.at < 2_000) return cached.client;
    reading ??= read().finally(() => {
      reading = undefined;
    });
    return reading;
  };
}
