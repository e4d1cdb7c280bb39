import { progressRun } from "@drover/engine";
import type { ServiceImplementation, WorkerService } from "@drover/proto";
import type { CoordinatorContext } from "./context.js";
import { requireRunId } from "./validation.js";

/**
 * What workers tell the coordinator. Only a shortcut: the reaper would find the same facts in the
 * database a few seconds later, so nothing is lost when a call never arrives.
 */
export function workerService(ctx: CoordinatorContext): ServiceImplementation<typeof WorkerService> {
  return {
    async taskFinished(req) {
      const runId = requireRunId(req.runId);
      await progressRun(
        { db: ctx.db, providers: ctx.providers, notesCap: ctx.config.DROVER_NOTES_CAP },
        runId,
      );
      await ctx.topUp(runId);
      return {};
    },
  };
}
