import { type Db, runs } from "@drover/db";
import type { Provider } from "@drover/provider-sdk";
import { eq, sql } from "drizzle-orm";
import { resolveDeferredLinks } from "./deferred-links.js";
import { revertSeeds } from "./revert.js";
import { toRunInfo } from "./run-info.js";
import {
  advanceBarrier,
  closeFollowPass,
  finalizeRun,
  phaseStillOpen,
  settleStoppingRun,
} from "./run-transitions.js";
import { seedContext } from "./source-capabilities.js";
import { insertTaskSeeds } from "./task-transitions.js";

export type RunProgress =
  | { kind: "unchanged" }
  | { kind: "advanced"; toPhase: number; seeded: number }
  | { kind: "finished"; status: "succeeded" | "failed" }
  | { kind: "stopped" };

export interface ProgressDeps {
  db: Db;
  providers: ReadonlyMap<string, Provider>;
  notesCap: number;
}

/**
 * Moves a run as far as its tasks allow: through the barrier (seeding each phase as it is reached,
 * and skipping phases that seed nothing), to its end, or from stopping to stopped. Safe to call
 * from anywhere at any time — after a TaskFinished, from the reaper, from two coordinators at once:
 * every step is a fenced statement, and the barrier and the seeding of the phase it opens commit
 * in one transaction.
 */
export async function progressRun(deps: ProgressDeps, runId: string): Promise<RunProgress> {
  if (await phaseStillOpen(deps.db, runId)) return { kind: "unchanged" };
  return deps.db.transaction(async (tx) => {
    const [run] = await tx.select().from(runs).where(eq(runs.id, runId));
    if (!run) return { kind: "unchanged" };
    if (run.status === "stopping") {
      return (await settleStoppingRun(tx, runId)) ? { kind: "stopped" } : { kind: "unchanged" };
    }
    if (run.status !== "running") return { kind: "unchanged" };
    const provider = deps.providers.get(run.source);
    if (!provider) throw new Error(`run ${run.id} uses unknown source "${run.source}"`);

    let phase = run.currentPhase;
    let seeded = 0;
    let advanced = false;
    while (phase < run.plan.length) {
      // A follow run stays on its closing phase (the catch-up), pass after pass, until cutover.
      if (run.follow && phase === run.plan.length - 1) {
        const step = await closeFollowPass(tx, runId, phase);
        if (step.kind === "busy") break;
        if (step.kind === "next") {
          const seeds = await provider.seedPhase(
            seedContext(tx, toRunInfo(run), phase, run.plan[phase] ?? [], {
              index: step.pass.index,
              since: step.pass.since,
            }),
          );
          seeded = await insertTaskSeeds(tx, runId, phase, seeds, {
            availableAt: new Date(step.pass.startsAt),
          });
          // A pass that seeds nothing has nothing to follow: the barrier passes and the run ends.
          if (seeds.length > 0) return { kind: "unchanged" };
        }
      }
      if (!(await advanceBarrier(tx, runId, phase))) break;
      advanced = true;
      // The phase's kinds and its tasks' own: a closing pass or a re-drive writes rows of earlier
      // phases' kinds in the last phase, and their same-phase references resolve here too.
      // Asked only of a source with such links (one index range of the phase's tasks).
      const written = provider.deferredLinks?.length
        ? await tx.execute<{ kind: string }>(
            sql`select distinct kind from drover.tasks where run_id = ${runId}::uuid and phase = ${phase}`,
          )
        : [];
      const kinds = [...new Set([...(run.plan[phase] ?? []), ...written.map((t) => t.kind)])];
      await resolveDeferredLinks(tx, run, kinds, provider.deferredLinks ?? [], deps.notesCap);
      phase++;
      if (phase >= run.plan.length) break;
      // A revert run walks the reverted run's ledger, not the source (revert.ts).
      const seeds = run.revertsRunId
        ? revertSeeds(run.plan[phase] ?? [])
        : await provider.seedPhase(seedContext(tx, toRunInfo(run), phase, run.plan[phase] ?? []));
      seeded = await insertTaskSeeds(tx, runId, phase, seeds);
      // A phase that seeds nothing (no deals, so no mail) passes at once.
      if (seeds.length > 0) break;
    }
    if (phase >= run.plan.length && (advanced || run.currentPhase >= run.plan.length)) {
      const status = await finalizeRun(tx, runId);
      if (status) return { kind: "finished", status };
    }
    return advanced ? { kind: "advanced", toPhase: phase, seeded } : { kind: "unchanged" };
  });
}
