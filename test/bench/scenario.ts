/** What a scenario hands back to the runner. */
export interface ScenarioResult {
  /** Figures by name, as printed (`name: value`). */
  figures: Record<string, number>;
  /** What the scenario ran with: sandbox flags, cluster shape, crm settings, kinds. */
  settings: Record<string, unknown>;
  /** Raw measurements behind the figures. */
  details: Record<string, unknown>;
}

export interface Scenario {
  name: string;
  /** The figures `--only` may name to select this scenario. */
  selects: readonly string[];
  run(): Promise<ScenarioResult>;
}
