import { progressRun, type RunProgress } from "@drover/engine";
import type { CoordinatorContext } from "./context.js";

/**
 * Progresses the run, then tops it up: moves it as far as its tasks allow (barrier, seeding,
 * finalize, stop settling) and publishes its deficit of tasks. What every caller that may have
 * changed a run's tasks does next (a TaskFinished, the reaper's pass, a start, stop, resume or
 * retry); safe to call any time, from any coordinator, every step being fenced.
 */
export async function advanceRun(ctx: CoordinatorContext, runId: string): Promise<RunProgress> {
  const progress = await progressRun(
    { db: ctx.db, providers: ctx.providers, notesCap: ctx.config.DROVER_NOTES_CAP },
    runId,
  );
  await ctx.topUp(runId);
  return progress;
}
