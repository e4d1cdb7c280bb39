import { progressRun, type RunProgress } from "@drover/engine";
import type { CoordinatorContext } from "./context.js";

/**
 * Progresses the run, then dispatches: moves it as far as its tasks allow (barrier, seeding,
 * finalize, stop settling) and deals the pool's free slots out again among the live runs (a task
 * that ended freed one, a new phase brought tasks). What every caller that may have changed a
 * run's tasks does next (a TaskFinished, the reaper's pass, a start, stop, resume or retry); safe
 * to call any time, from any coordinator, every step being fenced. The reaper advances every live
 * run without dispatching (`dispatch: false`) and dispatches once after.
 */
export async function advanceRun(
  ctx: CoordinatorContext,
  runId: string,
  options: { dispatch?: boolean } = {},
): Promise<RunProgress> {
  const progress = await progressRun(
    { db: ctx.db, providers: ctx.providers, notesCap: ctx.config.notesCap },
    runId,
  );
  if (options.dispatch !== false) await ctx.dispatch(runId);
  return progress;
}
