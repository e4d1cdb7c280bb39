/** What a scenario hands back to the runner. */
export interface ScenarioResult {
  /** Figures by name, as printed (`name: value`). */
  figures: Record<string, number>;
  /** What the scenario ran with: sandbox flags, cluster shape, crm settings, kinds. */
  settings: Record<string, unknown>;
  /** Raw measurements behind the figures. */
  details: Record<string, unknown>;
  /**
   * A figure measured in rounds: each round's value, the figure being their median. The runner
   * prints their spread beside the figure, so a reader sees how far one round could be trusted.
   */
  rounds?: Record<string, readonly number[]>;
}

/**
 * What the runner tells every scenario. Under `pnpm bench -- --quick` a scenario runs at a tenth of
 * its size (rows, deals, messages, repetitions), for a developer's loop: the figures are indicative
 * only, the full bench is the reference. A scenario takes every size through `scaled`, so a new
 * scenario honours `--quick` without a rule of its own.
 */
export interface ScenarioContext {
  /** `--quick` was given. */
  quick: boolean;
  /** The factor every size is multiplied by: 1, or 0.1 under `--quick`. */
  scale: number;
}

export const QUICK_SCALE = 0.1;

export function scenarioContext(quick: boolean): ScenarioContext {
  return { quick, scale: quick ? QUICK_SCALE : 1 };
}

/**
 * A size at the context's scale, rounded, never below `min`: a quick run keeps the smallest shape
 * that still exercises the path (e.g. one task per lane), not zero.
 */
export function scaled(ctx: ScenarioContext, full: number, min = 1): number {
  return Math.max(min, Math.round(full * ctx.scale));
}

export interface Scenario {
  name: string;
  /** The figures `--only` may name to select this scenario. */
  selects: readonly string[];
  run(ctx: ScenarioContext): Promise<ScenarioResult>;
}
