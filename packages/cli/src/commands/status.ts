import { GetRunResponseSchema } from "@drover/proto";
import { type CommandContext, one } from "../command-context.js";
import { runSummary } from "../render.js";

/** `drover status`: the run's phase, tasks, per-kind counts and verification. */
export async function status({ client, positionals, width, print }: CommandContext): Promise<number> {
  const response = await client.getRun({ runId: one(positionals, "run id") });
  print(runSummary(response.run!, { width }), GetRunResponseSchema, response);
  return 0;
}
