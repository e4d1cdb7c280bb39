import type { Run } from "./gen/drover/v1/run_pb.js";

/**
 * A run's facts (GetRun's `facts`, values JSON) as a person reads them, sorted by key: a string
 * without its quotes, anything else as JSON. One rendering for the CLI and the run page.
 */
export function runFacts(run: Pick<Run, "facts">): { key: string; value: string }[] {
  return Object.entries(run.facts)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, json]) => {
      let value: unknown = json;
      try {
        value = JSON.parse(json);
      } catch {
        // Not JSON after all: shown as it came.
      }
      return { key, value: typeof value === "string" ? value : JSON.stringify(value) };
    });
}
